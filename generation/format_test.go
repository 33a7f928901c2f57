package generation_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/generation"
)

// TestManifestValidateRefusesUnknownFormats: Validate takes only the
// formats this reader knows, 1 to 5; one below them, or a newer one (with
// nothing a newer field would explain: no carried writers, rebases or
// part checksums), is corrupt.
func TestManifestValidateRefusesUnknownFormats(t *testing.T) {
	for _, f := range []int{generation.FormatV1, generation.Format} {
		m := manifest(t, 1)
		m.Format = f
		require.NoError(t, m.Validate(), "format %d", f)
	}
	for _, f := range []int{-1, 0, generation.FormatRebased + 1, generation.FormatParts + 1, generation.FormatParts + 2} {
		t.Run(strconv.Itoa(f), func(t *testing.T) {
			m := manifest(t, 1)
			m.Format = f
			require.ErrorIs(t, m.Validate(), generation.ErrCorrupt)
		})
	}
}
