package testenv

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

// CheckPrintsNoCustomerKey checks that v, printed with %v, %+v or %s,
// shows neither the bytes of key nor key as text, and does show want
// (what it should be described by, such as its URL).
func CheckPrintsNoCustomerKey(t *testing.T, v any, key []byte, want string) {
	t.Helper()
	for _, format := range []string{"%v", "%+v", "%s"} {
		out := fmt.Sprintf(format, v)
		assert.NotContains(t, out, fmt.Sprint(key), format)
		assert.NotContains(t, out, string(key), format)
		assert.Contains(t, out, want, format)
	}
}
