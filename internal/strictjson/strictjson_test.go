package strictjson_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/strictjson"
)

func TestDecode(t *testing.T) {
	type doc struct {
		Format int    `json:"format"`
		Name   string `json:"name"`
	}
	for _, c := range []struct{ name, in, err string }{
		{"ok", `{"format":1,"name":"x"}`, ""},
		{"unknown format", `{"format":2,"name":"x"}`, "unknown format 2"},
		{"missing format", `{"name":"x"}`, "unknown format 0"},
		{"unknown field", `{"format":1,"extra":true}`, `unknown field "extra"`},
		{"trailing data", `{"format":1}{"format":1}`, "after top-level value"},
		{"not json", `nope`, "invalid character"},
	} {
		t.Run(c.name, func(t *testing.T) {
			var d doc
			err := strictjson.Decode([]byte(c.in), []int{1}, &d)
			if c.name == "ok" {
				require.NoError(t, err)
				assert.Equal(t, "x", d.Name)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.err)
		})
	}
}
