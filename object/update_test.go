package object_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/object"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// TestUpdateCountsEveryIncrementOnce: 16 writers increment one counter on
// every driver. No increment is lost, none is applied twice, and unknown
// outcomes stay rare.
func TestUpdateCountsEveryIncrementOnce(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		const workers, incs = 16, 50
		retry := object.Retry{Attempts: 1000, Base: time.Millisecond, Max: 50 * time.Millisecond}
		var wg sync.WaitGroup
		var ok, unknown atomic.Int64
		errs := make(chan error, workers)
		for range workers {
			wg.Go(func() {
				for range incs {
					_, err := object.Update(context.Background(), s, "state/counter", retry, func(old []byte, exists bool) ([]byte, error) {
						n := 0
						if exists {
							var err error
							if n, err = strconv.Atoi(string(old)); err != nil {
								return nil, err
							}
						}
						return []byte(strconv.Itoa(n + 1)), nil
					})
					switch {
					case err == nil:
						ok.Add(1)
					case errors.Is(err, object.ErrUnknown):
						// Honest, and rare: more than 40 writes landed
						// between this writer's read and its read-back.
						unknown.Add(1)
					default:
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
		rc, _, err := s.Get(context.Background(), "state/counter")
		require.NoError(t, err)
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		n, err := strconv.Atoi(string(b))
		require.NoError(t, err)
		assert.EqualValues(t, workers*incs, ok.Load()+unknown.Load())
		assert.GreaterOrEqual(t, int64(n), ok.Load(), "a lost update leaves the counter short")
		assert.LessOrEqual(t, int64(n), ok.Load()+unknown.Load(), "an update applied twice pushes the counter over")
		assert.Less(t, unknown.Load(), int64(workers*incs/20), "unknown outcomes must stay rare")
		t.Logf("counter %d: %d ok, %d unknown", n, ok.Load(), unknown.Load())
	})
}

// TestUpdateLostResponseSettlesAsLanded: the write lands, the response is
// lost; the read-back finds our write id and fn is not re-run.
func TestUpdateLostResponseSettlesAsLanded(t *testing.T) {
	for _, kind := range []faults.Kind{faults.Lost, faults.Retried} {
		fs := faults.NewStore(testenv.LocalStores()[0].New(t))
		fs.Add(faults.Rule{Op: store.OpPut, Key: "k", Kind: kind, Times: 1})
		runs := 0
		_, err := object.Update(context.Background(), fs, "k", object.DefaultRetry, func(old []byte, exists bool) ([]byte, error) {
			runs++
			return append(old, 'x'), nil
		})
		require.NoError(t, err)
		assert.Equal(t, 1, runs)
		rc, _, err := fs.Get(context.Background(), "k")
		require.NoError(t, err)
		b, _ := io.ReadAll(rc)
		rc.Close()
		assert.Equal(t, "x", string(b))
	}
}

// lateStore holds back the first Put (faults.Late) and sends it just
// before the next request of the chosen kind: a write whose request was
// delayed in the network and landed after the writer had given up on it.
type lateStore struct {
	*faults.Store
	applyOn store.Op
}

func newLateStore(s store.Store, applyOn store.Op) *lateStore {
	fs := faults.NewStore(s)
	fs.Add(faults.Rule{Op: store.OpPut, Kind: faults.Late, Times: 1})
	return &lateStore{Store: fs, applyOn: applyOn}
}

// release sends the held write before a request of the chosen kind. Its
// own outcome is what the tests check, through the object's content.
func (s *lateStore) release(op store.Op) {
	if op == s.applyOn {
		s.Release() //nolint:errcheck
	}
}

func (s *lateStore) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	s.release(store.OpGet)
	return s.Store.Get(ctx, key)
}

func (s *lateStore) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	s.release(store.OpPut)
	return s.Store.Put(ctx, key, body, opts)
}

// increment is an Update fn that adds 1 to a decimal counter, which
// starts at 0.
func increment(old []byte, exists bool) ([]byte, error) {
	if !exists {
		return []byte("1"), nil
	}
	n, err := strconv.Atoi(string(old))
	return []byte(strconv.Itoa(n + 1)), err
}

// TestUpdateLateWriteAppliesOnce: the first write seems lost (the object is
// unchanged on read-back) but lands later, before the retry reads or
// before the retry writes. fn's result must be applied exactly once, also
// when the retry is the final attempt: there the retry's 412 is settled by
// the read-back, not taken for a loss.
func TestUpdateLateWriteAppliesOnce(t *testing.T) {
	for _, retry := range []object.Retry{object.DefaultRetry, {Attempts: 2}} {
		for _, applyOn := range []store.Op{store.OpGet, store.OpPut} {
			t.Run(fmt.Sprintf("%d attempts/%s", retry.Attempts, applyOn), func(t *testing.T) {
				ctx := context.Background()
				m := mem.New()
				_, err := m.Put(ctx, "n", strings.NewReader("0"), store.PutOptions{})
				require.NoError(t, err)
				_, err = object.Update(ctx, newLateStore(m, applyOn), "n", retry, increment)
				require.NoError(t, err)
				assert.Equal(t, "1", testenv.ReadString(t, m, "n"), "one call, one increment")
			})
		}
	}
}

// TestUpdateUnsettledWriteIsUnknown: the first write is held in the network
// and not settled (the object is unchanged on read-back) when the call has
// to stop: the context ends during the backoff, fn fails when re-run, or
// the attempts run out. The held write lands afterwards, so the only
// honest answer is ErrUnknown, never a plain failure.
func TestUpdateUnsettledWriteIsUnknown(t *testing.T) {
	errFn := errors.New("fn failed")
	cases := []struct {
		name      string
		attempts  int
		cancel    bool // cancel the context while the write is held
		failRerun bool
		cause     error
	}{
		{name: "context ends during backoff", attempts: 5, cancel: true, cause: context.Canceled},
		{name: "fn fails when re-run", attempts: 5, failRerun: true, cause: errFn},
		{name: "attempts run out", attempts: 1, cause: faults.ErrInjected},
	}
	for _, f := range testenv.Stores() {
		for _, c := range cases {
			t.Run(f.Name+"/"+c.name, func(t *testing.T) {
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				raw := f.New(t)
				_, err := object.Update(ctx, raw, "n", object.DefaultRetry, increment)
				require.NoError(t, err)
				fs := faults.NewStore(raw)
				rule := faults.Rule{Op: store.OpPut, Key: "n", Kind: faults.Late, Times: 1}
				if c.cancel {
					rule.Then = cancel
				}
				fs.Add(rule)
				runs := 0
				retry := object.Retry{Attempts: c.attempts, Base: time.Millisecond, Max: time.Millisecond}
				_, err = object.Update(ctx, fs, "n", retry, func(old []byte, exists bool) ([]byte, error) {
					runs++
					if c.failRerun && runs > 1 {
						return nil, errFn
					}
					return increment(old, exists)
				})
				require.ErrorIs(t, err, object.ErrUnknown)
				assert.ErrorIs(t, err, c.cause)
				assert.Contains(t, err.Error(), `"n"`, "the error names the key")
				assert.Equal(t, "1", testenv.ReadString(t, raw, "n"), "the write is still held")
				require.NoError(t, fs.Release())
				assert.Equal(t, "2", testenv.ReadString(t, raw, "n"), "the held write landed after the call returned")
			})
		}
	}
}

// TestUpdateForeignOverwriteAfterLostResponse: our write lands, its
// response is lost, and another writer replaces the object before the
// read-back. A writer that keeps the lineage (Update) shows that ours
// landed; a plain PUT leaves no proof either way, so the call returns
// ErrUnknown and does not run fn again.
func TestUpdateForeignOverwriteAfterLostResponse(t *testing.T) {
	for _, f := range testenv.Stores() {
		for _, foreign := range []string{"plain", "update"} {
			t.Run(f.Name+"/"+foreign, func(t *testing.T) {
				ctx := context.Background()
				raw := f.New(t)
				_, err := object.Update(ctx, raw, "n", object.DefaultRetry, increment)
				require.NoError(t, err)
				fs := faults.NewStore(raw)
				fs.Add(faults.Rule{Op: store.OpPut, Key: "n", Kind: faults.Lost, Times: 1, Then: func() {
					if foreign == "plain" {
						_, err := raw.Put(ctx, "n", strings.NewReader("100"), store.PutOptions{})
						require.NoError(t, err)
						return
					}
					_, err := object.Update(ctx, raw, "n", object.DefaultRetry, func([]byte, bool) ([]byte, error) {
						return []byte("100"), nil
					})
					require.NoError(t, err)
				}})
				runs := 0
				_, err = object.Update(ctx, fs, "n", object.DefaultRetry, func(old []byte, exists bool) ([]byte, error) {
					runs++
					return increment(old, exists)
				})
				if foreign == "plain" {
					require.ErrorIs(t, err, object.ErrUnknown)
				} else {
					require.NoError(t, err)
				}
				assert.Equal(t, 1, runs, "fn must not run again after our write landed")
				assert.Equal(t, "100", testenv.ReadString(t, raw, "n"))
			})
		}
	}
}

// TestUpdateUnknownWhenReadBackFails: the write lands but its response is
// lost, and every read-back fails. On its last attempt the call cannot tell
// whether the write landed, so it must return ErrUnknown, not give up as
// though the write had lost.
func TestUpdateUnknownWhenReadBackFails(t *testing.T) {
	ctx := context.Background()
	m := mem.New()
	fs := faults.NewStore(m)
	fs.Add(faults.Rule{Op: store.OpPut, Key: "counter", Kind: faults.Lost, Times: 1})
	fs.Add(faults.Rule{Op: store.OpHead, Key: "counter", Kind: faults.Refused})
	calls := 0
	_, err := object.Update(ctx, fs, "counter", object.Retry{Attempts: 1, Base: time.Millisecond, Max: time.Millisecond},
		func(old []byte, exists bool) ([]byte, error) {
			calls++
			return []byte("1"), nil
		})
	require.ErrorIs(t, err, object.ErrUnknown)
	assert.Equal(t, 1, calls)
	_, err = m.Head(ctx, "counter")
	require.NoError(t, err, "the write did land")
}
