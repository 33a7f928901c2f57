package gc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
)

// TestReportVersions: the text report says what a collection on a bucket
// that keeps versions deleted, and that deletes which only added delete
// markers freed nothing.
func TestReportVersions(t *testing.T) {
	for _, c := range []struct {
		name     string
		versions store.Freed
		want     []string
		not      string
	}{
		{"no versions", store.Freed{}, nil, "keeps versions"},
		{"versions deleted", store.Freed{Versioned: true, Versions: 5, Markers: 1, Bytes: 2048, Requests: store.Counts{store.OpList: 1, store.OpDeleteMany: 2}},
			[]string{"objects deleted: 3 of 3 planned, 2.0 KiB", "the bucket keeps versions: 5 versions and 1 delete marker deleted (delete-many=2 list=1)"}, "nothing was freed"},
		{"markers only", store.Freed{Versioned: true},
			[]string{"objects deleted: 3 of 3 planned, 0 B", "nothing was freed"}, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			rep := &Report{Seq: 4, Generation: "g", Planned: 3, ObjectsDeleted: 3, BytesDeleted: c.versions.Bytes, Versions: c.versions}
			var b strings.Builder
			require.NoError(t, rep.WriteText(&b))
			for _, w := range c.want {
				assert.Contains(t, b.String(), w)
			}
			if c.not != "" {
				assert.NotContains(t, b.String(), c.not)
			}
		})
	}
}
