// Package strictjson decodes the versioned JSON documents commitptr reads
// back from stores (pointers, manifests): the "format" field is checked
// first, so that an unknown version is reported as such, and then the whole
// document is decoded refusing unknown fields and trailing data.
package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// Decode checks that b is a JSON object whose "format" is one of formats
// and decodes it into v. Errors describe the problem without a package prefix;
// callers wrap them with their own corrupt-input error.
func Decode(b []byte, formats []int, v any) error {
	var probe struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	if !slices.Contains(formats, probe.Format) {
		return fmt.Errorf("unknown format %d (this version reads %s)", probe.Format, strings.Trim(strings.Join(strings.Fields(fmt.Sprint(formats)), " or "), "[]"))
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return fmt.Errorf("trailing data after the document")
	}
	return nil
}
