package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// snapshots resolves the refs of one dataset to snapshots. Manifests are
// cached by generation, as a generation never changes; the pointer is
// trusted for refresh after its read began, and a tag as long. Each cached
// generation is held by a pin of the dataset, renewed while the generation
// is in use, so that the collector keeps what a reader is in the middle of.
type snapshots struct {
	d       *commit.Dataset
	refresh time.Duration
	pinTTL  time.Duration
	pins    *commit.PinHolder // nil when nothing is pinned
	log     *slog.Logger
	now     func() time.Time

	// curMu guards the current snapshot. A request that finds it stale
	// reads the pointer while holding curMu, so that a burst of requests
	// after the refresh interval reads it once; a request that finds it
	// about to go stale starts a read ahead, which no request waits for.
	curMu  sync.Mutex
	cur    *commit.Snapshot
	curAt  time.Time     // when the read of cur's pointer began
	took   time.Duration // how long the last read of the pointer took
	ahead  bool          // a read ahead is under way
	closed bool          // releaseAll has begun: no more reads ahead

	aheadCtx    context.Context // the reads ahead, cancelled by releaseAll
	aheadCancel context.CancelFunc
	aheadWG     sync.WaitGroup

	mu    sync.Mutex
	byGen map[string]*cached
	bySeq map[uint64]string
	tags  map[string]tagged
}

type cached struct {
	snap     *commit.Snapshot
	lastUsed time.Time
	// held is set once the pin holder holds snap for this entry: whoever
	// ends the entry then drops the hold, its remover if set, else the
	// request that took it.
	held bool
	// readers counts the GETs streaming the generation: an entry being
	// read is never forgotten.
	readers int
}

type tagged struct {
	gen string
	at  time.Time
}

func newSnapshots(d *commit.Dataset, o *Options) *snapshots {
	ctx, cancel := context.WithCancel(context.Background())
	s := &snapshots{
		d: d, refresh: o.Refresh, pinTTL: o.PinTTL, log: o.Logger, now: time.Now,
		aheadCtx: ctx, aheadCancel: cancel,
		byGen: map[string]*cached{}, bySeq: map[uint64]string{}, tags: map[string]tagged{},
	}
	if o.PinTTL > 0 {
		s.pins = commit.NewPinHolder(o.PinTTL, o.Owner, o.Logger)
	}
	return s
}

// resolve returns the snapshot ref names.
func (s *snapshots) resolve(ctx context.Context, ref commit.Ref) (*commit.Snapshot, error) {
	switch ref.Kind {
	case commit.RefCurrent:
		return s.current(ctx)
	case commit.RefGen:
		return s.generation(ctx, ref.Name)
	case commit.RefSeq:
		s.mu.Lock()
		gen, ok := s.bySeq[ref.Seq]
		s.mu.Unlock()
		if ok {
			return s.generation(ctx, gen)
		}
	case commit.RefTag:
		s.mu.Lock()
		t, ok := s.tags[ref.Name]
		s.mu.Unlock()
		if ok && s.now().Sub(t.at) < s.refresh {
			return s.generation(ctx, t.gen)
		}
		return s.tag(ctx, ref)
	}
	snap, err := s.d.OpenRef(ctx, ref)
	if err != nil {
		return nil, err
	}
	return s.remember(ctx, snap), nil
}

// tag reads the tag ref names, and opens what it names unless that
// generation is cached: a tag read again after refresh costs one GET.
func (s *snapshots) tag(ctx context.Context, ref commit.Ref) (*commit.Snapshot, error) {
	began := s.now()
	t, err := s.d.ReadTag(ctx, ref.Name)
	if err != nil {
		return nil, err
	}
	snap := s.generationCached(t.Generation)
	if snap == nil || snap.Seq() != t.Seq {
		if snap, err = s.d.OpenRef(ctx, ref); err != nil {
			return nil, err
		}
		snap = s.remember(ctx, snap)
	}
	s.mu.Lock()
	s.tags[ref.Name] = tagged{gen: snap.Generation(), at: began}
	s.mu.Unlock()
	return snap, nil
}

// current returns the current snapshot, reading the pointer if the read
// of the one it has began refresh ago or more. Within the last stretch of
// that time (see aheadMargin) it starts a read ahead and answers with the
// snapshot it has, so that under steady load no request waits for the
// pointer.
func (s *snapshots) current(ctx context.Context) (*commit.Snapshot, error) {
	s.curMu.Lock()
	defer s.curMu.Unlock()
	now := s.now()
	if s.cur != nil && now.Sub(s.curAt) < s.refresh {
		if now.Sub(s.curAt) >= s.refresh-s.aheadMargin() && !s.ahead && !s.closed {
			s.ahead = true
			s.aheadWG.Add(1)
			go s.readAhead(s.cur)
		}
		s.touch(s.cur.Generation())
		return s.cur, nil
	}
	snap, err := s.readPointer(ctx, s.cur)
	if err != nil {
		return nil, err
	}
	s.cur, s.curAt, s.took = snap, now, s.now().Sub(now)
	return s.cur, nil
}

// aheadMargin is how long before the pointer goes stale a read ahead
// begins: twice the last read's time, at least a tenth of refresh and at
// most half of it. curMu is held.
func (s *snapshots) aheadMargin() time.Duration {
	return min(max(2*s.took, s.refresh/10), s.refresh/2)
}

// readAhead reads the pointer and makes what it names the current
// snapshot, unless a read that began later already did.
func (s *snapshots) readAhead(known *commit.Snapshot) {
	defer s.aheadWG.Done()
	began := s.now()
	snap, err := s.readPointer(s.aheadCtx, known)
	s.curMu.Lock()
	defer s.curMu.Unlock()
	s.ahead = false
	if err != nil {
		s.log.Warn("serve: cannot read the pointer ahead of its refresh", "err", err)
		return
	}
	if !began.Before(s.curAt) {
		s.cur, s.curAt, s.took = snap, began, s.now().Sub(began)
	}
}

// readPointer reads the pointer and returns the snapshot it names: known
// if that is its generation, else the cached one or one it opens.
func (s *snapshots) readPointer(ctx context.Context, known *commit.Snapshot) (*commit.Snapshot, error) {
	p, _, err := pointer.Read(ctx, s.d.Store())
	if errors.Is(err, store.ErrNotExist) {
		return nil, fmt.Errorf("%w (no %s)", commit.ErrNoCommits, pointer.Key)
	}
	if err != nil {
		return nil, err
	}
	snap := known
	if snap == nil || snap.Generation() != p.Generation {
		if snap = s.generationCached(p.Generation); snap == nil {
			if snap, err = s.d.OpenPointer(ctx, p); err != nil {
				return nil, err
			}
		}
	}
	return s.remember(ctx, snap), nil
}

// generation returns the snapshot of generation gen, from the cache or
// found through the history (or a pin or tag) of the current pointer.
func (s *snapshots) generation(ctx context.Context, gen string) (*commit.Snapshot, error) {
	if snap := s.generationCached(gen); snap != nil {
		return snap, nil
	}
	snap, err := s.d.OpenRef(ctx, commit.GenRef(gen))
	if err != nil {
		return nil, err
	}
	return s.remember(ctx, snap), nil
}

func (s *snapshots) generationCached(gen string) *commit.Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.byGen[gen]
	if !ok {
		return nil
	}
	c.lastUsed = s.now()
	return c.snap
}

func (s *snapshots) touch(gen string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.byGen[gen]; ok {
		c.lastUsed = s.now()
	}
}

// remember caches snap and pins its generation, unless it is cached
// already; it returns the cached snapshot.
func (s *snapshots) remember(ctx context.Context, snap *commit.Snapshot) *commit.Snapshot {
	gen := snap.Generation()
	s.mu.Lock()
	if c, ok := s.byGen[gen]; ok {
		c.lastUsed = s.now()
		s.mu.Unlock()
		return c.snap
	}
	c := &cached{snap: snap, lastUsed: s.now()}
	s.byGen[gen] = c
	s.bySeq[snap.Seq()] = gen
	s.mu.Unlock()
	if s.pins != nil {
		s.pins.Hold(ctx, snap)
		s.mu.Lock()
		kept := s.byGen[gen] == c
		c.held = kept
		s.mu.Unlock()
		if !kept {
			s.pins.Drop(ctx, gen)
		}
	}
	return snap
}

// reading marks a request that streams snap's generation, until the
// function it returns is called: maintenance keeps the generation, and its
// pin, while a request reads it, however long that takes.
func (s *snapshots) reading(ctx context.Context, snap *commit.Snapshot) func() {
	gen := snap.Generation()
	s.mu.Lock()
	c, ok := s.byGen[gen]
	if !ok {
		// Forgotten since it was resolved: cache it again.
		s.mu.Unlock()
		s.remember(ctx, snap)
		s.mu.Lock()
		if c, ok = s.byGen[gen]; !ok {
			s.mu.Unlock()
			return func() {}
		}
	}
	c.readers++
	s.mu.Unlock()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			c.readers--
			c.lastUsed = s.now()
			s.mu.Unlock()
		})
	}
}

// maintain renews the pins of the generations used within the pin's TTL,
// and forgets (and unpins) the others, except the current one.
func (s *snapshots) maintain(ctx context.Context) {
	s.curMu.Lock()
	var curGen string
	if s.cur != nil {
		curGen = s.cur.Generation()
	}
	s.curMu.Unlock()
	now := s.now()
	s.mu.Lock()
	var forget []string
	for gen, c := range s.byGen {
		if gen != curGen && c.readers == 0 && now.Sub(c.lastUsed) >= s.pinTTL {
			delete(s.byGen, gen)
			delete(s.bySeq, c.snap.Seq())
			if c.held {
				forget = append(forget, gen)
			}
		}
	}
	s.mu.Unlock()
	if s.pins == nil {
		return
	}
	for _, gen := range forget {
		s.pins.Drop(ctx, gen)
	}
	s.pins.Renew(ctx)
}

// releaseAll stops the reads ahead and deletes every pin the server holds.
func (s *snapshots) releaseAll(ctx context.Context) error {
	s.curMu.Lock()
	s.closed = true
	s.curMu.Unlock()
	s.aheadCancel()
	s.aheadWG.Wait()
	if s.pins == nil {
		return nil
	}
	return s.pins.Close(ctx)
}
