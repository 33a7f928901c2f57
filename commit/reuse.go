package commit

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/store"
)

// refState tracks the files a Tx references from older generations
// (PutFile's reuse, KeepAll, KeepFrom), which must be proven present before
// the commit.
type refState struct {
	// verified holds the keys proven present with a plausible size.
	verified map[string]bool
	// local maps a path reused by PutFile to the entry it reused and the
	// local file that matched it, so that a missing object can be uploaded
	// again.
	local map[string]reusedFile
	// repaired counts the files uploaded again for that reason.
	repaired int
	// resume maps a path to the entry Resume offered for it.
	resume map[string]generation.Entry
}

type reusedFile struct {
	entry generation.Entry
	local string
	opts  fileOptions // as PutFile was given them, for reading local again
	// resumed: the entry came from Resume, not from the base.
	resumed bool
}

// minProvedPerPage is the fewest keys a LIST page must prove for the
// listing of a run of keys to go on; below it the rest of the run is
// checked with parallel HEADs. A page that proves at least two keys costs
// less than their HEADs, so verification never sends more than one request
// per key plus one page per run.
const minProvedPerPage = 2

// VerifyReferences proves that the object of every file the Tx references
// from another generation (files PutFile reused, and those of KeepAll and
// KeepFrom) still exists, with the entry's size when it is stored as is
// (a zstd-encoded object of a non-empty file must not be empty; its stored
// size is not recorded). A file that PutFile reused whose object is
// missing or has the wrong size is uploaded again from its local file. Any
// other such file makes it fail with ErrMissingObject, naming the paths
// and keys.
//
// Commit runs it before writing the manifest, so calling it is needed only
// to learn the outcome earlier. Keys once proven are not checked again. (A
// commit that may join a group-commit round, see Rebase, proves the files
// it keeps from its base untouched only if it writes a manifest of its own
// on its base: a commit that carries it takes those paths from its head.)
//
// Cost: the keys are sorted into runs of up to 1,000: those of one
// generation that holds several of them, and together those that are each
// the only one of their generation, listed across generations. A run of
// one key costs a HEAD; a longer run is listed from just below its first
// key, one LIST page at a time, while each page proves at least two of its
// keys, and the rest of the run is checked with HEADs. So the references
// cost at most one LIST page per 1,000 keys when their generations hold
// few other objects, and never more than one request per key plus one
// page per run. Runs are checked in parallel, up to the dataset's
// concurrency.
func (tx *Tx) VerifyReferences(ctx context.Context) error {
	tx.mu.Lock()
	if err := tx.checkOpen(); err != nil {
		tx.mu.Unlock()
		return err
	}
	tx.mu.Unlock()
	if err := tx.awaitBase(ctx); err != nil {
		return err
	}
	return tx.verifyReferences(ctx, nil)
}

// ReuseProof proves the objects PutFile reuses for a batch of files while
// the batch's uploads are still under way, instead of after them in
// Commit: the proof needs the base manifest, not the new objects, so it
// costs no round trip of its own. It starts once PutFile has decided, for
// every file of the batch, whether it reuses or uploads, so it proves them
// all in the same requests Commit would send; and only if the batch both
// reuses and uploads (a batch that only reuses may turn out to change
// nothing, and then needs no proof). Commit proves whatever is left, as
// always, before the manifest.
type ReuseProof struct {
	tx  *Tx
	ctx context.Context

	mu sync.Mutex
	// left counts the files not decided yet, unreported those that
	// neither decided nor matched the expected manifest.
	left, unreported int
	reused, uploaded bool
	// ahead holds the entries of the expected manifest (BeginAhead) that
	// files matched before the base was read.
	ahead      []generation.Entry
	decidedAll chan struct{} // closed when left reaches 0
	over       chan struct{} // closed by Wait: no more decisions come
	overOnce   sync.Once
	done       chan error // set once the proof started
	waitOnce   sync.Once
	err        error // what the proof returned, once Wait took it
}

// NewReuseProof returns the proof for a batch of n PutFile calls, each to
// be given its Option. Wait for it once they have all returned. The proof
// runs on ctx, not on a context its batch cancels when it returns.
func (tx *Tx) NewReuseProof(ctx context.Context, n int) *ReuseProof {
	return &ReuseProof{tx: tx, ctx: ctx, left: n, unreported: n, decidedAll: make(chan struct{}), over: make(chan struct{})}
}

// Option is the FileOption to pass to each PutFile of the batch.
func (p *ReuseProof) Option() FileOption {
	return func(o *fileOptions) {
		matched := false
		o.matched = func(e generation.Entry) {
			matched = true
			p.matched(e)
		}
		o.decided = func(reused bool) { p.decided(reused, matched) }
	}
}

// matched notes a file that matches the expected manifest's entry e while
// the base is being read: it will most likely reuse e's object.
func (p *ReuseProof) matched(e generation.Entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.unreported--
	p.ahead = append(p.ahead, e)
	p.start()
}

// decided notes a file that reuses (or uploads); matched says it matched
// the expected manifest before.
func (p *ReuseProof) decided(reused, matched bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.left--
	if !matched {
		p.unreported--
	}
	p.reused = p.reused || reused
	p.uploaded = p.uploaded || !reused
	if p.left == 0 {
		close(p.decidedAll)
	}
	p.start()
}

// start starts the proof once every file has reported, if some upload and
// some reuse or matched the expected manifest. It proves the matched
// entries' objects first (proveAhead), then, once every file decided, the
// objects the batch reuses that are still unproven. p.mu is held.
func (p *ReuseProof) start() {
	if p.done != nil || p.unreported > 0 || !p.uploaded || (!p.reused && len(p.ahead) == 0) {
		return
	}
	p.done = make(chan error, 1)
	ahead := p.ahead
	go func() {
		if len(ahead) > 0 {
			p.tx.proveAhead(p.ctx, ahead)
		}
		// Every file decided, or the batch is over (a file failed
		// before deciding): the reuses decided are proven now, whatever
		// is left in Commit.
		select {
		case <-p.decidedAll:
		case <-p.over:
		}
		// A file that Resume offered is referenced without waiting for
		// the base, whose horizon its proof needs.
		if err := p.tx.awaitBase(p.ctx); err != nil {
			p.done <- err
			return
		}
		// Only PutFile's reuses: each has its local file to upload
		// again if its object turns out unusable. Kept files wait for
		// Commit, which knows which of them a group commit may carry.
		// (verifyReferences calls skip with tx.mu held.)
		p.done <- p.tx.verifyReferences(p.ctx, func(e generation.Entry) bool {
			r, ok := p.tx.refs.local[e.Path]
			return !ok || r.entry != e
		})
	}()
}

// Wait waits for the proof, if it started, and returns its error; again,
// the same error.
func (p *ReuseProof) Wait() error {
	p.overOnce.Do(func() { close(p.over) })
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return nil
	}
	p.waitOnce.Do(func() { p.err = <-done })
	return p.err
}

// proveAhead proves, while the pointer is being read, the objects of the
// expected manifest's entries that files matched. It counts them proven
// only once the base turns out to be that very manifest: the objects are
// then the base's, which the collector does not delete while the base is
// current (and the pointer PUT fails if it no longer is). Otherwise what
// it learned is dropped, and the proof before the manifest asks again.
func (tx *Tx) proveAhead(ctx context.Context, entries []generation.Entry) {
	keys := map[string]bool{}
	for _, e := range entries {
		keys[e.Key] = true
	}
	stats, err := tx.d.statAll(ctx, slices.Collect(maps.Keys(keys)))
	if err != nil || tx.awaitBase(ctx) != nil || tx.base == nil || tx.base.ManifestSHA256 != tx.expectedSum {
		return
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.refs.verified == nil {
		tx.refs.verified = map[string]bool{}
	}
	for _, e := range entries {
		if st, found := stats[e.Key]; unusable(e, st.size, found) == "" {
			tx.refs.verified[e.Key] = true
		}
	}
}

// verifyReferences is VerifyReferences, leaving out the entries that
// skip, if not nil, says can wait. The caller has waited for the base.
func (tx *Tx) verifyReferences(ctx context.Context, skip func(generation.Entry) bool) error {
	tx.mu.Lock()
	own := generation.Prefix(tx.gen)
	want := map[string][]generation.Entry{} // key → the entries reading it
	// The manifests of the generations of resumed objects: one that wrote
	// its manifest may have been committed, and the collector deletes a
	// committed generation's objects without moving the horizon.
	manifests := map[string]bool{}
	for _, e := range tx.entries {
		if !strings.HasPrefix(e.Key, own) && !tx.refs.verified[e.Key] && (skip == nil || !skip(e)) {
			want[e.Key] = append(want[e.Key], e)
			if r, ok := tx.refs.local[e.Path]; ok && r.entry == e && r.resumed {
				manifests[generation.ManifestKey(generation.FromKey(e.Key))] = true
			}
		}
	}
	tx.mu.Unlock()
	if len(want) == 0 {
		return nil
	}

	stats, err := tx.d.statAll(ctx, slices.Concat(slices.Collect(maps.Keys(want)), slices.Collect(maps.Keys(manifests))))
	if err != nil {
		return fmt.Errorf("commit: verify referenced objects: %w", err)
	}
	var horizon time.Time
	if tx.base != nil {
		horizon = tx.base.GCHorizon
	}
	var bad []string
	var redo []reusedFile
	var start time.Time // the earliest time of a resumed object
	broken := map[string]bool{}
	for key, es := range want {
		st, found := stats[key]
		for _, e := range es {
			tx.mu.Lock()
			r, ok := tx.refs.local[e.Path]
			tx.mu.Unlock()
			local := ok && r.entry == e
			why := unusable(e, st.size, found)
			if _, committed := stats[generation.ManifestKey(generation.FromKey(key))]; why == "" && local && r.resumed && committed {
				why = "belongs to a generation that wrote its manifest, which the horizon does not guard"
			}
			if why == "" && local && r.resumed {
				var at time.Time
				if at, why = resumedStart(st.modified, horizon); why == "" && (start.IsZero() || at.Before(start)) {
					start = at
				}
			}
			if why == "" {
				continue
			}
			broken[key] = true
			if local {
				tx.d.log.Warn("reused object is unusable; uploading the file again", "path", e.Path, "key", key, "problem", why)
				redo = append(redo, r)
				continue
			}
			bad = append(bad, fmt.Sprintf("%s: object %s %s", e.Path, key, why))
		}
	}
	if len(bad) > 0 {
		slices.Sort(bad)
		if len(bad) > 10 {
			bad = append(bad[:10], fmt.Sprintf("and %d more", len(bad)-10))
		}
		return fmt.Errorf("%w: %s", ErrMissingObject, strings.Join(bad, "; "))
	}
	if err := tx.reupload(ctx, redo); err != nil {
		return err
	}
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if tx.refs.verified == nil {
		tx.refs.verified = map[string]bool{}
	}
	for key := range want {
		if !broken[key] {
			tx.refs.verified[key] = true
		}
	}
	// The collector's horizon now guards the resumed objects (see Resume).
	if !start.IsZero() && start.Before(tx.stagingStart) {
		tx.stagingStart = start
	}
	return nil
}

// unusable says what is wrong with the object of e, of the stored size
// (negative: not reported) if found, or "" when it can be referenced.
func unusable(e generation.Entry, size int64, found bool) string {
	switch {
	case !found:
		return "missing"
	case size < 0:
		// The store did not say; existence is proven.
	case e.Encoding == generation.EncodingNone && size != e.Size:
		return fmt.Sprintf("has %d bytes, the manifest says %d", size, e.Size)
	case e.Encoding != generation.EncodingNone && size == 0 && e.Size > 0:
		return "is empty"
	}
	return ""
}

// reupload stages again, from their local files, reused files whose
// objects turned out unusable.
func (tx *Tx) reupload(ctx context.Context, files []reusedFile) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(tx.d.concurrency)
	for _, r := range files {
		e := r.entry
		g.Go(func() error {
			f, fi, err := openLocal(r.local, r.opts)
			if err != nil {
				return fmt.Errorf("commit: upload %q again: %w", e.Path, err)
			}
			defer f.Close()
			if err := tx.putLocal(gctx, e.Path, f, fi, e.Size, fileAttrs{mode: e.Mode, mtime: e.MTime}, r.opts); err != nil {
				return err
			}
			tx.mu.Lock()
			defer tx.mu.Unlock()
			delete(tx.refs.local, e.Path)
			if r.resumed {
				tx.resumed--
			} else {
				tx.reused--
				tx.refs.repaired++
			}
			return nil
		})
	}
	return g.Wait()
}

// Repaired returns how many files matched the base generation but were
// uploaded again because the object they would have reused was missing or
// had the wrong size.
func (tx *Tx) Repaired() int {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	return tx.refs.repaired
}

// Reuses reports whether the Tx references the object of the base
// generation for path because PutFile matched the local file, instead of
// uploading it. A file uploaded again by the proof before the commit (see
// VerifyReferences) is not reused, nor is one resumed (see Resumes).
func (tx *Tx) Reuses(path string) bool {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	r, ok := tx.refs.local[path]
	return ok && !r.resumed
}

// noteReuse records that PutFile referenced e for path, matched against
// the local file: the base's entry, or one Resume offered (resumed).
func (tx *Tx) noteReuse(e generation.Entry, local string, o fileOptions, resumed bool) error {
	tx.mu.Lock()
	defer tx.mu.Unlock()
	if err := tx.checkOpen(); err != nil {
		return err
	}
	if tx.refs.local == nil {
		tx.refs.local = map[string]reusedFile{}
	}
	tx.refs.local[e.Path] = reusedFile{e, local, o, resumed}
	if resumed {
		tx.resumed++
	} else {
		tx.reused++
	}
	tx.entries[e.Path] = e
	tx.touch(e.Path)
	return nil
}

// objectStat is what a listing or a HEAD says of a stored object.
type objectStat struct {
	size     int64
	modified time.Time // the store's Last-Modified
}

// statAll returns what the store says of each of keys that exists; see
// VerifyReferences for the cost.
func (d *Dataset) statAll(ctx context.Context, keys []string) (map[string]objectStat, error) {
	slices.Sort(keys)
	var mu sync.Mutex
	found := make(map[string]objectStat, len(keys))
	record := func(key string, st objectStat) {
		mu.Lock()
		defer mu.Unlock()
		found[key] = st
	}
	var heads []string // keys left to HEAD
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(d.concurrency)
	for _, r := range keyRuns(keys) {
		if len(r.keys) == 1 {
			mu.Lock()
			heads = append(heads, r.keys[0])
			mu.Unlock()
			continue
		}
		g.Go(func() error {
			rest, err := d.listRun(gctx, r.prefix, r.keys, r.after, record)
			mu.Lock()
			defer mu.Unlock()
			heads = append(heads, rest...)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	g, gctx = errgroup.WithContext(ctx)
	g.SetLimit(d.concurrency)
	for _, key := range heads {
		g.Go(func() error {
			var a store.Attrs
			err := retryRead(gctx, d.retry, func() (err error) {
				a, err = d.s.Head(gctx, key)
				return err
			})
			switch {
			case errors.Is(err, store.ErrNotExist):
				return nil
			case err != nil:
				return err
			}
			record(key, objectStat{a.Size, a.LastModified})
			return nil
		})
	}
	return found, g.Wait()
}

// keyRun is a sorted run of keys to prove by listing prefix, which holds
// them all, from after.
type keyRun struct {
	prefix, after string
	keys          []string
}

// keyRuns groups sorted keys into runs of up to store.MaxListPage: the
// keys of a generation that holds several, and together the keys that are
// each the only one of their generation, listed across generations. (A
// generation that holds many other objects then costs one page that proves
// one key, not a run of HEADs; the generations of files kept from
// partitions that other writers published hold few.)
func keyRuns(keys []string) []keyRun {
	var runs []keyRun
	var lone []string
	for i := 0; i < len(keys); {
		prefix := generation.Prefix(generation.FromKey(keys[i]))
		j := i + 1
		for j < len(keys) && strings.HasPrefix(keys[j], prefix) {
			j++
		}
		if j == i+1 {
			lone = append(lone, keys[i])
		} else {
			after := ""
			for ; i < j; i += store.MaxListPage {
				run := keys[i:min(j, i+store.MaxListPage)]
				runs = append(runs, keyRun{prefix: prefix, after: startBelow(run[0], after), keys: run})
				after = run[len(run)-1]
			}
		}
		i = j
	}
	for len(lone) > 0 {
		n := min(len(lone), store.MaxListPage)
		first := lone[0]
		runs = append(runs, keyRun{prefix: generation.Dir, after: startBelow(first, generation.Prefix(generation.FromKey(first))), keys: lone[:n]})
		lone = lone[n:]
	}
	return runs
}

// startBelow returns where a listing that must show key starts: just
// below it when that can be said, otherwise after, a string below key.
func startBelow(key, after string) string {
	if p, ok := justBefore(key); ok && p > after {
		return p
	}
	return after
}

// listRun proves the keys of run, sorted and all under prefix, by listing
// prefix from after, a key below run[0] or "". It records the size of each
// key found and returns the keys left to HEAD.
func (d *Dataset) listRun(ctx context.Context, prefix string, run []string, after string, record func(string, objectStat)) ([]string, error) {
	for len(run) > 0 {
		var page store.ListPage
		err := retryRead(ctx, d.retry, func() (err error) {
			page, err = d.s.List(ctx, store.ListRequest{Prefix: prefix, StartAfter: after})
			return err
		})
		if err != nil {
			return nil, err
		}
		stats := make(map[string]objectStat, len(page.Objects))
		for _, o := range page.Objects {
			stats[o.Key] = objectStat{o.Size, o.LastModified}
		}
		proved := len(run)
		if page.Next != "" && len(page.Objects) > 0 {
			// Only keys up to the page's last one are settled.
			last := page.Objects[len(page.Objects)-1].Key
			proved, _ = slices.BinarySearch(run, last)
			if proved < len(run) && run[proved] == last {
				proved++
			}
			after = last
			if proved < len(run) {
				if p, ok := justBefore(run[proved]); ok && p > after {
					after = p // skip objects no reference needs
				}
			}
		} else if page.Next != "" {
			proved = 0
		}
		for _, key := range run[:proved] {
			if st, ok := stats[key]; ok {
				record(key, st)
			}
		}
		run = run[proved:]
		if proved < minProvedPerPage {
			return run, nil
		}
	}
	return nil, nil
}

// justBefore returns a string below key that no other valid UTF-8 key lies
// between, in practice: key with its last byte lowered by one and U+10FFFF
// appended. Only for a key ending in an ASCII byte.
func justBefore(key string) (string, bool) {
	n := len(key)
	if n == 0 || key[n-1] == 0 || key[n-1] >= 0x80 {
		return "", false
	}
	return key[:n-1] + string(key[n-1]-1) + "\U0010FFFF", true
}
