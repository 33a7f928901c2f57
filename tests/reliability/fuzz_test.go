package reliability_test

import (
	"context"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// FuzzLeaseBody feeds arbitrary lease objects to lease.Status and
// lease.TryAcquire (the lease package's own parser is unexported). A
// refused body is ErrCorrupt and is never taken over; an accepted one has
// sane fields; a takeover writes a strictly larger token (I5).
func FuzzLeaseBody(f *testing.F) {
	for _, b := range []string{
		`{"owner":"h:1","token":3,"ttl_ms":30000,"released":false,"write_id":"w"}`,
		`{"owner":"h:1","token":3,"ttl_ms":30000,"released":true,"write_id":"w"}`,
		`{"owner":"h:1","token":18446744073709551615,"ttl_ms":1000,"released":true,"write_id":"w"}`,
		`{"owner":"","token":1,"ttl_ms":1,"write_id":"w"}`,
		`{"owner":"h","token":0,"ttl_ms":1,"write_id":"w"}`,
		`{"owner":"h","token":1,"ttl_ms":-1,"write_id":"w"}`,
		`{"owner":"h","token":1,"ttl_ms":1,"write_id":"w","x":1}`,
		`{"owner":"h","token":1,"ttl_ms":1,"write_id":"w"} {}`,
		`{"owner":"h","token":1.5,"ttl_ms":1,"write_id":"w"}`,
		``, `null`, `[]`, `{`,
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		ctx := context.Background()
		s := mem.New()
		_, err := s.Put(ctx, lease.Key("l"), strings.NewReader(string(body)), store.PutOptions{})
		require.NoError(t, err)
		info, err := lease.Status(ctx, s, "l")
		l, aerr := lease.TryAcquire(ctx, s, "l", lease.Options{TTL: time.Second, Owner: "fuzz"})
		if l != nil {
			defer l.Release(ctx)
		}
		if err != nil {
			require.ErrorIs(t, err, lease.ErrCorrupt, "every refusal is typed")
			require.Error(t, aerr, "a corrupt lease was taken over")
			require.False(t, errors.Is(aerr, lease.ErrHeld), "a corrupt lease was reported as held: %v", aerr)
			return
		}
		require.NotEmpty(t, info.Owner)
		require.LessOrEqual(t, len(info.Owner), 256)
		require.NotZero(t, info.Token)
		require.Positive(t, info.TTL)
		switch {
		case info.Token == math.MaxUint64 && info.Expired:
			require.ErrorIs(t, aerr, lease.ErrCorrupt, "a token that cannot grow must not be taken over")
		case aerr == nil:
			require.True(t, info.Expired, "took over a live lease")
			require.Greater(t, l.Token(), info.Token, "I5: the takeover's token does not increase")
		case info.Expired:
			t.Fatalf("could not take over an expired lease: %v", aerr)
		default:
			require.ErrorIs(t, aerr, lease.ErrHeld)
		}
	})
}
