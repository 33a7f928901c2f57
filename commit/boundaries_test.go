package commit_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// TestReaderExactLengthRead (I3): a reader that reads exactly the
// manifest's size of a file (io.ReadFull, io.CopyN) never asks for the EOF
// that triggers the sha256 check. An object replaced by another of the same
// length must still fail the read that delivers its last byte, not pass.
func TestReaderExactLengthRead(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		ctx := context.Background()
		d := commit.New(s)
		_, err := publish(t, d, map[string]string{"a.txt": "good data"}, commit.CommitOptions{})
		require.NoError(t, err)
		snap, err := d.Open(ctx)
		require.NoError(t, err)
		e, ok := snap.Manifest.Find("a.txt")
		require.True(t, ok)
		_, err = s.Put(ctx, e.Key, strings.NewReader("evil data"), store.PutOptions{})
		require.NoError(t, err)

		for name, read := range map[string]func(io.Reader) ([]byte, error){
			"ReadFull": func(r io.Reader) ([]byte, error) {
				b := make([]byte, e.Size)
				_, err := io.ReadFull(r, b)
				return b, err
			},
			"CopyN": func(r io.Reader) ([]byte, error) {
				var buf bytes.Buffer
				_, err := io.CopyN(&buf, r, e.Size)
				return buf.Bytes(), err
			},
		} {
			rc, err := snap.Open(ctx, "a.txt")
			require.NoError(t, err)
			got, err := read(rc)
			rc.Close()
			assert.ErrorIs(t, err, commit.ErrChecksum, "%s delivered %q as a.txt of generation %s", name, got, snap.Generation())
		}
	})
}

// TestFenceIdentitySpellings (I6, fences per lease): the fence of a lease is
// kept under its identity, a spelling of the store's URL. Two spellings of
// one location (a symbolic link to the directory; the s3 and minio drivers
// on one bucket) reach one lease object, whose tokens they share, but give
// two identities. A former holder that spells the URL one way then commits
// with its lower token after the new holder, spelling it the other way,
// registered a higher one.
func TestFenceIdentitySpellings(t *testing.T) {
	ctx := context.Background()
	spellings := map[string]func(t *testing.T) (urlA, urlB string){
		"fs symlink": func(t *testing.T) (string, string) {
			dir := t.TempDir()
			real := filepath.Join(dir, "real")
			require.NoError(t, os.Mkdir(real, 0o755))
			link := filepath.Join(dir, "link")
			require.NoError(t, os.Symlink(real, link))
			return real, link
		},
		"s3 and minio drivers": func(t *testing.T) (string, string) {
			srv := testenv.S3(t)
			srv.UseCredentials()
			bucket := srv.NewBucket(t)
			q := "?endpoint=" + url.QueryEscape(srv.Endpoint) + "&path_style=true"
			return "s3://" + bucket + "/ds" + q, "minio://" + bucket + "/ds" + q
		},
	}
	for name, spell := range spellings {
		t.Run(name, func(t *testing.T) {
			urlA, urlB := spell(t)
			sA, err := store.Open(ctx, urlA, store.Config{})
			require.NoError(t, err)
			sB, err := store.Open(ctx, urlB, store.Config{})
			require.NoError(t, err)
			idA, err := lease.Identity(urlA, "writer")
			require.NoError(t, err)
			idB, err := lease.Identity(urlB, "writer")
			require.NoError(t, err)

			dA := commit.New(sA)
			_, err = publish(t, dA, map[string]string{"x": "first"}, commit.CommitOptions{})
			require.NoError(t, err)

			// One lease object: the holder through A blocks B, and B's
			// token follows A's.
			opts := lease.Options{TTL: time.Minute, Owner: "a"}
			lA, err := lease.TryAcquire(ctx, sA, "writer", opts)
			require.NoError(t, err)
			_, err = lease.TryAcquire(ctx, sB, "writer", lease.Options{TTL: time.Minute, Owner: "b"})
			require.ErrorIs(t, err, lease.ErrHeld, "both spellings reach the same lease")
			txA, err := dA.Begin(ctx) // the holder through A stages, then pauses
			require.NoError(t, err)
			require.NoError(t, txA.PutBytes(ctx, "x", []byte("stale")))
			require.NoError(t, lA.Release(ctx)) // as if its TTL ran out
			lB, err := lease.TryAcquire(ctx, sB, "writer", lease.Options{TTL: time.Minute, Owner: "b"})
			require.NoError(t, err)
			require.Greater(t, lB.Token(), lA.Token())
			require.NoError(t, commit.New(sB).RegisterFence(ctx, idB, lB.Token()))

			_, err = txA.Commit(ctx, commit.CommitOptions{Fence: lA.Token(), FenceLease: idA})
			assert.ErrorIs(t, err, commit.ErrFenced,
				"token %d of the lease committed after token %d was registered (identities %q and %q)", lA.Token(), lB.Token(), idA, idB)
		})
	}
}

// TestManyLeasesFillThePointer: the pointer keeps one fence per lease
// identity and commits never drop one, within pointer.MaxSize. A dataset
// written under a lease per job (a name per night, a prefix per team)
// would fill it, so the pointer takes at most pointer.MaxFences identities
// of at most pointer.MaxIdentity bytes, and refuses more with a clear
// error. A commit whose pointer no longer fits, with the fences it copies
// from the current pointer, must be refused as such before anything is
// sent, not reported as an unknown outcome: Commit's up-front check of the
// encoding leaves out those fences.
func TestManyLeasesFillThePointer(t *testing.T) {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	_, err := publish(t, d, map[string]string{"x": "first"}, commit.CommitOptions{})
	require.NoError(t, err)
	id := func(n int) string {
		prefix := "s3://bucket/" + strings.Repeat("team/", 90) + "_lease/nightly-"
		return fmt.Sprintf("%s%0*d", prefix, pointer.MaxIdentity-len(prefix), n)
	}
	for n := range pointer.MaxFences {
		require.Len(t, id(n), pointer.MaxIdentity)
		require.NoError(t, d.RegisterFence(ctx, id(n), 1), "lease %d of %d", n, pointer.MaxFences)
	}
	err = d.RegisterFence(ctx, id(pointer.MaxFences), 1)
	require.ErrorIs(t, err, pointer.ErrFenceLimit, "lease %d", pointer.MaxFences+1)
	assert.Contains(t, err.Error(), id(pointer.MaxFences))
	assert.Len(t, readPointer(t, s).Fences, pointer.MaxFences)

	c := store.Count(s)
	_, err = publish(t, commit.New(c), map[string]string{"x": "second"},
		commit.CommitOptions{Message: strings.Repeat("m", 14000)})
	require.Error(t, err, "the pointer cannot hold this commit with %d fences", pointer.MaxFences)
	assert.EqualValues(t, 2, c.Counts()[store.OpPut], "only the object and the manifest were sent: %s", c.Counts())
	assert.NotErrorIs(t, err, commit.ErrCommitUnknown, "no pointer write was sent, yet: %v", err)
	assert.Contains(t, err.Error(), "refused before sending the pointer")

	// A fence of a lease already kept still moves, and a commit that
	// fits still commits.
	_, err = publish(t, d, map[string]string{"x": "third"}, commit.CommitOptions{Fence: 2, FenceLease: id(0)})
	require.NoError(t, err)
	assert.EqualValues(t, 2, readPointer(t, s).FenceOf(id(0)))
}

// TestCommitReturnsThePointerWritten (I2): the first pointer write is held
// in the network; the read-back finds the pointer unchanged, so Commit
// sends it again. The held write lands just before the second arrives,
// which then fails its condition. The read-back proves the commit ours,
// and Commit returns success, but with the second write's body, whose
// write_id was never the pointer's: the pointer value returned must be one
// the pointer had.
func TestCommitReturnsThePointerWritten(t *testing.T) {
	testenv.EachStore(t, func(t *testing.T, s store.Store) {
		_, err := publish(t, commit.New(s), map[string]string{"x": "first"}, commit.CommitOptions{})
		require.NoError(t, err)
		fs := faults.NewStore(s)
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Late, Times: 1})
		fs.Add(faults.Rule{Op: store.OpPut, Key: pointer.Key, Kind: faults.Latency, Times: 1, Then: func() {
			require.NoError(t, fs.Release())
		}})
		got, err := publish(t, commit.New(fs), map[string]string{"x": "second"}, commit.CommitOptions{})
		require.NoError(t, err)
		now := readPointer(t, s)
		assert.Equal(t, now.Generation, got.Generation, "the commit is the current generation")
		assert.Equal(t, now.WriteID, got.WriteID, "Commit returned a pointer the store never held")
	})
}
