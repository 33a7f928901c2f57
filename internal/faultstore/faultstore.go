// Package faultstore wraps a store.Store and injects faults into chosen
// requests, for tests: a request that fails before it is sent, one that is
// applied but whose response is lost, the SDK-retry shape in which the lost
// response is followed by a resend that the store refuses, writes held in
// flight, before or after they land, while the test acts, and a write held
// back in the network that lands after the caller gave up on it.
package faultstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync"

	"github.com/commitptr/commitptr/store"
)

// Mode says when a fault strikes.
type Mode int

const (
	// Before fails the request without sending it.
	Before Mode = iota
	// After sends the request, then replaces its result with the error:
	// the store changed, the caller hears of a failure.
	After
	// AfterRetry sends the request, then sends it again, as an SDK retry
	// does after a lost response, and returns the second result (for a
	// conditional write: a precondition failure against its own write).
	AfterRetry
	// Cut, for a Get, returns the first half of the body and then the
	// error, as a connection that breaks mid-download.
	Cut
	// HoldRequest, for a Put or a List, runs Then before the request
	// reaches the store, then sends it and returns its real result: a
	// request delayed in the network.
	HoldRequest
	// HoldResponse, for a Put, sends the request, runs Then, and returns
	// the real result: a write that landed at once and whose response
	// came late.
	HoldResponse
	// Hold, for a Put, keeps the request back and returns the error, as a
	// request delayed in the network whose response the caller gave up
	// on. Store.Release sends it later.
	Hold
)

// ErrInjected is the default injected error, a timeout-like failure.
var ErrInjected = errors.New("faultstore: injected fault (response lost)")

// Rule injects a fault into matching requests.
type Rule struct {
	Op store.Op
	// Key matches requests whose key has this prefix; "" matches all.
	Key  string
	Mode Mode
	// Times is how many matching requests fail; 0 means every one.
	Times int
	// Err is returned; nil means ErrInjected.
	Err error
	// Then, if set, runs after an applied (or, for Hold, held) request and
	// before the caller hears back, e.g. to let another writer act in
	// between; with HoldRequest, before the request is sent. A Then that
	// blocks holds the request in flight.
	Then func()
}

// Store injects faults by rule into the store it wraps.
type Store struct {
	store.Store
	mu    sync.Mutex
	rules []*rule
	held  []func() error
}

type rule struct {
	Rule
	hits int
}

// New wraps s.
func New(s store.Store) *Store { return &Store{Store: s} }

// Add installs a rule. Cut applies to Get only; HoldRequest to Put and
// List; HoldResponse and Hold to Put only. A List rule matches on the
// request's prefix, and knows Before and HoldRequest.
func (s *Store) Add(r Rule) {
	if r.Mode == Cut && r.Op != store.OpGet {
		panic("faultstore: Cut applies to Get only")
	}
	if r.Mode == HoldRequest && r.Op != store.OpPut && r.Op != store.OpList {
		panic("faultstore: HoldRequest applies to Put and List only")
	}
	if (r.Mode == HoldResponse || r.Mode == Hold) && r.Op != store.OpPut {
		panic("faultstore: HoldResponse and Hold apply to Put only")
	}
	if r.Op == store.OpList && r.Mode != Before && r.Mode != HoldRequest {
		panic("faultstore: a List rule is Before or HoldRequest")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = append(s.rules, &rule{Rule: r})
}

// Clear removes all rules.
func (s *Store) Clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rules = nil
}

func (s *Store) match(op store.Op, key string) *Rule {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.rules {
		if r.Op != op || !strings.HasPrefix(key, r.Key) || (r.Times > 0 && r.hits >= r.Times) {
			continue
		}
		r.hits++
		c := r.Rule
		if c.Err == nil {
			c.Err = ErrInjected
		}
		return &c
	}
	return nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, store.Attrs, error) {
	r := s.match(store.OpGet, key)
	if r != nil && r.Mode == Before {
		return nil, store.Attrs{}, store.Wrap("get", key, nil, r.Err)
	}
	rc, a, err := s.Store.Get(ctx, key)
	switch {
	case r == nil || err != nil:
		return rc, a, err
	case r.Mode == Cut:
		return CutBody(rc, a.Size/2, store.Wrap("get", key, nil, r.Err)), a, nil
	}
	rc.Close()
	return nil, store.Attrs{}, store.Wrap("get", key, nil, r.Err)
}

// CutBody returns a body that delivers the first n bytes of rc, then fails
// with err, as a connection that breaks mid-download.
func CutBody(rc io.ReadCloser, n int64, err error) io.ReadCloser {
	return &cutBody{rc: rc, left: n, err: err}
}

type cutBody struct {
	rc   io.ReadCloser
	left int64
	err  error
}

func (c *cutBody) Read(p []byte) (int, error) {
	if c.left <= 0 {
		return 0, c.err
	}
	n, err := c.rc.Read(p[:min(int64(len(p)), c.left)])
	c.left -= int64(n)
	if err == io.EOF {
		err = c.err // the body was shorter than the cut: still a cut
	}
	return n, err
}

func (c *cutBody) Close() error { return c.rc.Close() }

// Head implements store.Store. A rule fails it with Before; other modes
// have nothing to lose in a Head and leave it alone.
func (s *Store) Head(ctx context.Context, key string) (store.Attrs, error) {
	if r := s.match(store.OpHead, key); r != nil && r.Mode == Before {
		return store.Attrs{}, store.Wrap("head", key, nil, r.Err)
	}
	return s.Store.Head(ctx, key)
}

// Put implements store.Store.
func (s *Store) Put(ctx context.Context, key string, body io.Reader, opts store.PutOptions) (store.Attrs, error) {
	r := s.match(store.OpPut, key)
	if r == nil {
		return s.Store.Put(ctx, key, body, opts)
	}
	switch r.Mode {
	case Before:
		return store.Attrs{}, store.Wrap("put", key, nil, r.Err)
	case HoldRequest:
		if r.Then != nil {
			r.Then()
		}
		return s.Store.Put(ctx, key, body, opts)
	case HoldResponse:
		a, err := s.Store.Put(ctx, key, body, opts)
		if r.Then != nil {
			r.Then()
		}
		return a, err
	}
	b, err := io.ReadAll(body)
	if err != nil {
		return store.Attrs{}, err
	}
	if r.Mode == Hold {
		s.mu.Lock()
		s.held = append(s.held, func() error {
			_, err := s.Store.Put(context.Background(), key, bytes.NewReader(b), opts)
			return err
		})
		s.mu.Unlock()
		if r.Then != nil {
			r.Then()
		}
		return store.Attrs{}, store.Wrap("put", key, nil, r.Err)
	}
	a, err := s.Store.Put(ctx, key, bytes.NewReader(b), opts)
	if err != nil {
		return a, err // the request failed on its own; nothing to inject
	}
	if r.Then != nil {
		r.Then()
	}
	if r.Mode == AfterRetry {
		return s.Store.Put(ctx, key, bytes.NewReader(b), opts)
	}
	return store.Attrs{}, store.Wrap("put", key, nil, r.Err)
}

// Release sends the Puts held so far, in the order they were made, and
// returns their errors (a held conditional write may now fail its
// condition).
func (s *Store) Release() error {
	s.mu.Lock()
	held := s.held
	s.held = nil
	s.mu.Unlock()
	var errs []error
	for _, send := range held {
		errs = append(errs, send())
	}
	return errors.Join(errs...)
}

// List implements store.Store.
func (s *Store) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	if r := s.match(store.OpList, req.Prefix); r != nil {
		if r.Mode == Before {
			return store.ListPage{}, store.Wrap("list", req.Prefix, nil, r.Err)
		}
		if r.Then != nil {
			r.Then()
		}
	}
	return s.Store.List(ctx, req)
}

// Delete implements store.Store.
func (s *Store) Delete(ctx context.Context, key string, opts store.DeleteOptions) error {
	if r := s.match(store.OpDelete, key); r != nil && r.Mode == Before {
		return store.Wrap("delete", key, nil, r.Err)
	}
	return s.Store.Delete(ctx, key, opts)
}

// DeleteMany implements store.Store. A rule matches on the first key.
func (s *Store) DeleteMany(ctx context.Context, keys []string) error {
	if len(keys) > 0 {
		if r := s.match(store.OpDeleteMany, keys[0]); r != nil && r.Mode == Before {
			return store.Wrap("delete-many", keys[0], nil, r.Err)
		}
	}
	return s.Store.DeleteMany(ctx, keys)
}
