package store

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"
)

// Op is a kind of store request, for accounting.
type Op int

// The request kinds. DeleteMany counts one per batch of MaxDeleteBatch keys
// and List one per page, as S3 bills them.
const (
	OpGet Op = iota
	OpHead
	OpPut
	OpDelete
	OpDeleteMany
	OpList
	numOps
)

var opNames = [numOps]string{"get", "head", "put", "delete", "delete-many", "list"}

func (o Op) String() string { return opNames[o] }

// Counts is a snapshot of request counts by kind.
type Counts [numOps]int64

// Total returns the sum over all kinds.
func (c Counts) Total() int64 {
	var t int64
	for _, n := range c {
		t += n
	}
	return t
}

// Sub returns c - d, for measuring one operation.
func (c Counts) Sub(d Counts) Counts {
	for i := range c {
		c[i] -= d[i]
	}
	return c
}

// MarshalJSON writes the non-zero counts as an object labelled by
// operation in snake_case, e.g. {"get":1,"delete_many":2}.
func (c Counts) MarshalJSON() ([]byte, error) {
	m := make(map[string]int64, numOps)
	for i, n := range c {
		if n != 0 {
			m[Op(i).jsonName()] = n
		}
	}
	return json.Marshal(m)
}

// UnmarshalJSON reads what MarshalJSON writes. An unknown label is an
// error rather than a count dropped in silence.
func (c *Counts) UnmarshalJSON(b []byte) error {
	var m map[string]int64
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*c = Counts{}
next:
	for k, n := range m {
		for i := range numOps {
			if Op(i).jsonName() == k {
				c[i] = n
				continue next
			}
		}
		return fmt.Errorf("store: unknown request kind %q", k)
	}
	return nil
}

func (o Op) jsonName() string { return strings.ReplaceAll(o.String(), "-", "_") }

// String formats the non-zero counts, e.g. "get=1 put=3".
func (c Counts) String() string {
	var parts []string
	for i, n := range c {
		if n != 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", Op(i), n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, " ")
}

// Counter is a Store that counts the requests it passes to the store below.
// It counts requests sent, whatever their outcome.
type Counter struct {
	s Store
	n [numOps]atomic.Int64
}

// Count wraps s with request accounting.
func Count(s Store) *Counter { return &Counter{s: s} }

// Counts returns the counts so far.
func (c *Counter) Counts() Counts {
	var out Counts
	for i := range c.n {
		out[i] = c.n[i].Load()
	}
	return out
}

// Unwrap returns the counted store.
func (c *Counter) Unwrap() Store { return c.s }

// SweepLeftovers implements LeftoverSweeper for the store below, counting
// the requests the sweep reports.
func (c *Counter) SweepLeftovers(ctx context.Context, prefix string, olderThan time.Duration) (Leftovers, error) {
	got, err := SweepLeftovers(ctx, c.s, prefix, olderThan)
	for op, n := range got.Requests {
		c.n[op].Add(n)
	}
	return got, err
}

func (c *Counter) Get(ctx context.Context, key string) (io.ReadCloser, Attrs, error) {
	c.n[OpGet].Add(1)
	return c.s.Get(ctx, key)
}

// GetRange counts as a Get: a ranged GET is a GET request.
func (c *Counter) GetRange(ctx context.Context, key string, off, n int64) (io.ReadCloser, Attrs, error) {
	c.n[OpGet].Add(1)
	return c.s.GetRange(ctx, key, off, n)
}

func (c *Counter) Head(ctx context.Context, key string) (Attrs, error) {
	c.n[OpHead].Add(1)
	return c.s.Head(ctx, key)
}

func (c *Counter) Put(ctx context.Context, key string, body io.Reader, opts PutOptions) (Attrs, error) {
	c.n[OpPut].Add(1)
	return c.s.Put(ctx, key, body, opts)
}

func (c *Counter) Delete(ctx context.Context, key string, opts DeleteOptions) error {
	c.n[OpDelete].Add(1)
	return c.s.Delete(ctx, key, opts)
}

func (c *Counter) DeleteMany(ctx context.Context, keys []string) error {
	c.n[OpDeleteMany].Add(int64((len(keys) + MaxDeleteBatch - 1) / MaxDeleteBatch))
	return c.s.DeleteMany(ctx, keys)
}

func (c *Counter) List(ctx context.Context, req ListRequest) (ListPage, error) {
	c.n[OpList].Add(1)
	return c.s.List(ctx, req)
}
