// Package strictjson decodes the versioned JSON documents commitptr reads
// back from stores (pointers, manifests): the "format" field is checked
// first, so that an unknown version is reported as such, and then the whole
// document is decoded refusing unknown fields and trailing data.
package strictjson

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// Decode checks that b is a JSON object whose "format" equals format and
// decodes it into v. Errors describe the problem without a package prefix;
// callers wrap them with their own corrupt-input error.
func Decode(b []byte, format int, v any) error {
	var probe struct {
		Format int `json:"format"`
	}
	if err := json.Unmarshal(b, &probe); err != nil {
		return err
	}
	if probe.Format != format {
		return fmt.Errorf("unknown format %d (this version reads %d)", probe.Format, format)
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
