package reliability_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/object"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// TestObjectUpdateSpurious412 is the shape the soak found: the response to
// an applied write is lost, the SDK's retry gets 412 against that very
// write, and the read-back fails. object.Update takes the 412 for a clean
// loss and runs fn again, so one call increments the counter twice. A 412
// that may be our own write is only a loss once the read-back shows a
// version that replaced our base and is not ours.
func TestObjectUpdateSpurious412(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	fs := faults.NewStore(m)
	fs.Add(faults.Rule{Op: store.OpPut, Key: "counter", Kind: faults.Retried, Times: 1})
	fs.Add(faults.Rule{Op: store.OpHead, Kind: faults.Refused, Times: 1}) // the read-back fails
	_, err := object.Update(ctx, fs, "counter", object.Retry{Attempts: 5}, func(old []byte, exists bool) ([]byte, error) {
		n, _ := strconv.Atoi(string(old))
		return []byte(strconv.Itoa(n + 1)), nil
	})
	rc, _, gerr := m.Get(ctx, "counter")
	require.NoError(t, gerr)
	defer rc.Close()
	var b [16]byte
	k, _ := rc.Read(b[:])
	got := string(b[:k])
	switch {
	case err == nil && got != "1":
		t.Errorf("Update succeeded once but the counter is %s", got)
	case err != nil && !errors.Is(err, object.ErrUnknown):
		t.Errorf("Update failed with %v (not ErrUnknown), but its write landed: the counter is %s", err, got)
	}
}
