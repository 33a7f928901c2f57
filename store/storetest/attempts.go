package storetest

import (
	"bytes"
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/store"
)

// AttemptCase is a status every request is answered with, and how many
// attempts one operation makes at it. Status 0 stands for a refused
// connection, if the driver's transport answers that way.
type AttemptCase struct {
	Status int
	Want   int64
}

// attemptOps are a read, a write and a listing.
var attemptOps = map[string]func(context.Context, store.Store) error{
	"get": func(ctx context.Context, s store.Store) error {
		rc, _, err := s.Get(ctx, "k")
		if err == nil {
			rc.Close()
		}
		return err
	},
	"put": func(ctx context.Context, s store.Store) error {
		_, err := s.Put(ctx, "k", bytes.NewReader([]byte("v")), store.PutOptions{Size: 1})
		return err
	},
	"list": func(ctx context.Context, s store.Store) error {
		_, err := s.List(ctx, store.ListRequest{Prefix: "p/"})
		return err
	},
}

// Attempts checks that a read, a write and a listing, each answered with
// a case's status, make its number of attempts, and that each operation
// counts its own: three in a row on one store, and eight at once, each
// make as many. open returns a store whose every request is answered with
// status, and the count of requests sent; check, if not nil, looks at the
// error of the last operation in a row.
func Attempts(t *testing.T, cases []AttemptCase, open func(t *testing.T, status int) (store.Store, *atomic.Int64), check func(t *testing.T, status int, err error)) {
	t.Helper()
	for _, c := range cases {
		for name, op := range attemptOps {
			s, sent := open(t, c.Status)
			var err error
			for range 3 {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				err = op(ctx, s)
				cancel()
				require.Error(t, err, "%s answered %d", name, c.Status)
			}
			assert.Equal(t, 3*c.Want, sent.Load(), "attempts of 3 %ss in a row answered %d: %v", name, c.Status, err)
			if check != nil {
				check(t, c.Status, err)
			}

			sent.Store(0)
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					op(ctx, s) //nolint:errcheck // the attempts are what counts
				})
			}
			wg.Wait()
			assert.Equal(t, 8*c.Want, sent.Load(), "attempts of 8 %ss at once answered %d", name, c.Status)
		}
	}
}
