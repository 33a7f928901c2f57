package main

import (
	"context"
	"io"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// interrupters are the cancel functions of the commands that
// nodelete://NAME stores belong to, by NAME.
var interrupters sync.Map

func init() {
	store.Register("nodelete", func(_ context.Context, u *url.URL, _ store.Config) (store.Store, error) {
		v, _ := interrupters.Load(u.Host)
		return &noDelete{Store: mem.New(), cancel: v.(context.CancelFunc), at: u.Query().Get("at")}, nil
	})
}

// noDelete is a store that may not delete, as for credentials without
// s3:DeleteObject, and that interrupts its command (cancels the context
// of Main) as it writes the first staged file ("file") or the manifest
// ("manifest"), once that write is done.
type noDelete struct {
	store.Store
	cancel context.CancelFunc
	at     string
	once   sync.Once
}

func (s *noDelete) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	a, err := s.Store.Put(context.WithoutCancel(ctx), key, body, opts)
	manifest := strings.HasSuffix(key, "/"+generation.ManifestName)
	if strings.HasPrefix(key, generation.Dir) && (s.at == "manifest") == manifest {
		s.once.Do(s.cancel)
		return a, context.Canceled
	}
	return a, err
}

func (s *noDelete) Delete(_ context.Context, key string, _ store.DeleteOptions) error {
	return store.Wrap("delete", key, store.ErrAccess, nil)
}

func (s *noDelete) DeleteMany(_ context.Context, keys []string) error {
	return store.Wrap("delete-many", keys[0], store.ErrAccess, nil)
}

// TestInterruptedPutThatLeftObjectsNeverSaysDiscarded: a put interrupted
// while staging, or as it commits, that cannot delete what it staged
// says what it left, never that it discarded it.
func TestInterruptedPutThatLeftObjectsNeverSaysDiscarded(t *testing.T) {
	src := writeTree(t, map[string]string{"a": "1", "b": "2", "c": "3"})
	for _, at := range []string{"file", "manifest"} {
		t.Run(at, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			name := "int-" + at
			interrupters.Store(name, cancel)
			var out, errb strings.Builder
			code := Main(ctx, []string{"put", "--concurrency", "1", src, "nodelete://" + name + "?at=" + at}, strings.NewReader(""), &out, &errb)
			assert.NotEqual(t, exitOK, code, errb.String())
			assert.NotContains(t, errb.String(), "was discarded", errb.String())
			assert.Contains(t, errb.String(), "deleting what it staged failed")
		})
	}
}
