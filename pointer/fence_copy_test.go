package pointer_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/commitptr/commitptr/pointer"
)

// TestRaiseFenceLeavesCopyAlone: a pointer copied with a struct assignment
// shares the fence map with its original; raising a fence in the copy, of
// a lease the original keeps or of a new one, leaves the original's fences
// as they were. A writer builds the pointer it sends on a copy of the
// pointer it read, which must still say what was read.
func TestRaiseFenceLeavesCopyAlone(t *testing.T) {
	var read pointer.Pointer
	read.RaiseFence("s3://b/_lease/a", 3)
	read.RaiseFence("s3://b/_lease/b", 4)
	read.RaiseFence("", 5)

	next := read
	next.RaiseFence("s3://b/_lease/a", 7)
	next.RaiseFence("s3://b/_lease/c", 8)
	next.RaiseFence("", 9)

	assert.Equal(t, map[string]uint64{"s3://b/_lease/a": 3, "s3://b/_lease/b": 4}, read.Fences, "the original's fences")
	assert.Equal(t, uint64(5), read.FenceOf(""), "the original's unnamed fence")
	assert.Equal(t, map[string]uint64{"s3://b/_lease/a": 7, "s3://b/_lease/b": 4, "s3://b/_lease/c": 8}, next.Fences, "the copy's fences")
	assert.Equal(t, uint64(9), next.FenceOf(""), "the copy's unnamed fence")
}
