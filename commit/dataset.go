package commit

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store"
)

// The errors of this package.
var (
	// ErrConflict: another writer committed first. Errors of this class are
	// *ConflictError values naming the winner.
	ErrConflict = errors.New("commit: lost the race")
	// ErrCommitUnknown: the pointer write may or may not have taken effect
	// and it could not be proven either way. Nothing was deleted.
	ErrCommitUnknown = errors.New("commit: outcome unknown")
	// ErrStale: the collector's horizon passed this generation's staging
	// start, so some of its objects may have been collected.
	ErrStale = errors.New("commit: generation is stale")
	// ErrFenced: the same lease has committed or registered a higher
	// fencing token, or the dataset takes fenced writers only.
	ErrFenced = errors.New("commit: fenced")
	// ErrCollected: an object of a snapshot is gone; the snapshot outlived
	// retention. Pin snapshots that must live long, or reopen.
	ErrCollected = errors.New("commit: object collected")
	// ErrMissing: an object of a snapshot the collector retains is gone,
	// so something other than commitptr deleted it. 'publish verify'
	// finds such objects, and 'publish verify --repair SRC' restores them.
	ErrMissing = errors.New("commit: object missing")
	// ErrChecksum: a file's size or sha256 differs from its manifest entry.
	ErrChecksum = errors.New("commit: checksum mismatch")
	// ErrNoCommits: the dataset has no pointer yet.
	ErrNoCommits = errors.New("commit: dataset has no commits")
	// ErrNotFound: a path, seq or generation is not in the snapshot or history.
	ErrNotFound = errors.New("commit: not found")
	// ErrMissingObject: a file the commit references from an older
	// generation has no object, or one of the wrong size, and there is no
	// local copy to upload again. Nothing was committed.
	ErrMissingObject = errors.New("commit: referenced object missing")
	// ErrFileDirClash: the generation would hold a file at a path that
	// another of its paths needs as a directory ("a" and "a/b"), which no
	// file system can hold. Nothing was committed.
	ErrFileDirClash = errors.New("file and directory at one path")
)

// ConflictError reports a lost race.
type ConflictError struct {
	// Winner is the generation that took the seq this commit wanted.
	Winner string
	Seq    uint64
	// Overlap, for a commit with rebase, names the paths (at most 100)
	// that this commit read and that the generations committed since its
	// base changed, sorted.
	Overlap []string
}

func (e *ConflictError) Error() string {
	msg := fmt.Sprintf("commit: lost the race for seq %d to generation %s", e.Seq, e.Winner)
	if len(e.Overlap) > 0 {
		shown := e.Overlap
		if len(shown) > 5 {
			shown = shown[:5]
		}
		msg += fmt.Sprintf("; both changed %d paths: %s", len(e.Overlap), strings.Join(shown, ", "))
		if len(e.Overlap) > len(shown) {
			msg += ", ..."
		}
	}
	return msg
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// FencedError reports a commit or fence registration refused by fencing.
type FencedError struct {
	// Lease is the identity of the lease whose tokens were compared; empty
	// for the unnamed lease.
	Lease string
	// Mine is the refused token (0: the commit carried none, and the
	// dataset takes fenced writers only); Committed is the lease's highest
	// token in the pointer.
	Mine, Committed uint64
}

func (e *FencedError) Error() string {
	switch {
	case e.Mine == 0:
		return "commit: fenced: the dataset takes fenced writers only, and this commit carries no fencing token"
	case e.Lease == "":
		return fmt.Sprintf("commit: fenced: token %d is below the committed token %d", e.Mine, e.Committed)
	}
	return fmt.Sprintf("commit: fenced: token %d of lease %s is below its registered token %d", e.Mine, e.Lease, e.Committed)
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// Dataset is a dataset under a store: everything the store holds, laid out
// as in the package doc. Open a dataset under a key prefix with
// store.WithPrefix. A Dataset is safe for concurrent use.
type Dataset struct {
	s           store.Store
	writer      string
	concurrency int
	compress    bool
	partSize    int64
	reuse       bool
	retry       Retry
	log         *slog.Logger
	// grouped is set while this Dataset's commits are in rounds (carried,
	// or carrying others): a commit with rebase on an open base then joins
	// a round from its first compare-and-swap without listing first (see
	// carryFirst).
	grouped atomic.Bool
	clock   roundClock
	last    lastManifest
	cache   *manifestCache
}

// Option configures a Dataset.
type Option func(*Dataset)

// WithWriter names the writer in pointers and manifests (informational).
// The default is "<hostname>:<pid>".
func WithWriter(name string) Option { return func(d *Dataset) { d.writer = name } }

// WithConcurrency bounds parallel uploads and downloads; the default is 16.
func WithConcurrency(n int) Option {
	return func(d *Dataset) {
		if n > 0 {
			d.concurrency = n
		}
	}
}

// WithCompression stores data objects zstd-encoded. Manifests record the
// encoding, and readers decode transparently.
func WithCompression(on bool) Option { return func(d *Dataset) { d.compress = on } }

// WithPartSize sets the span of the part checksums recorded for each
// file stored as is and longer than one part, which let readers verify a
// range without reading the whole file (see generation.Entry.Parts). The
// default is generation.DefaultPartSize; 0 records none, and other values
// are held within [generation.MinPartSize, generation.MaxPartSize].
func WithPartSize(n int64) Option {
	return func(d *Dataset) {
		if n != 0 {
			n = min(max(n, generation.MinPartSize), generation.MaxPartSize)
		}
		d.partSize = n
	}
}

// WithReuse(false) makes PutFile upload every file, even one the base
// generation already holds unchanged. The default is true.
func WithReuse(on bool) Option { return func(d *Dataset) { d.reuse = on } }

// WithRetry sets the retry policy of Update; see DefaultRetry.
func WithRetry(r Retry) Option { return func(d *Dataset) { d.retry = r } }

// WithLogger sets the logger; the default discards.
func WithLogger(l *slog.Logger) Option { return func(d *Dataset) { d.log = l } }

// New returns the dataset stored in s.
func New(s store.Store, opts ...Option) *Dataset {
	host, _ := os.Hostname()
	d := &Dataset{
		s:           s,
		writer:      host + ":" + strconv.Itoa(os.Getpid()),
		concurrency: 16,
		partSize:    generation.DefaultPartSize,
		reuse:       true,
		retry:       DefaultRetry,
		log:         slog.New(slog.DiscardHandler),
		clock:       machineClock{},
	}
	for _, o := range opts {
		o(d)
	}
	return d
}

// Store returns the dataset's store.
func (d *Dataset) Store() store.Store { return d.s }

// resolveTimeout bounds the reads that settle an ambiguous pointer write.
// They run even after the caller's context is cancelled: walking away
// without knowing the outcome would leave it unknown.
const resolveTimeout = 30 * time.Second

// CheckPath refuses a path that no commit of this dataset can stage: one
// generation.CheckPath refuses, or one whose object key, with the store's
// prefix, is longer than the store takes (store.MaxKeyBytes). A writer
// checks all its paths with it before it uploads anything.
func (d *Dataset) CheckPath(path string) error {
	if err := generation.CheckPath(path); err != nil {
		return err
	}
	// Every generation id has the length of this one.
	const anyGeneration = "00000000-0000-0000-0000-000000000000"
	if n := len(store.FullKey(d.s, generation.DataKey(anyGeneration, path))); n > store.MaxKeyBytes {
		return fmt.Errorf("path of %d bytes: its object key would have %d bytes with the store's prefix, more than the %d object stores take: %w", len(path), n, store.MaxKeyBytes, store.ErrInvalidKey)
	}
	return nil
}
