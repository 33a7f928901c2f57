package storetest

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/faults"
	"github.com/commitptr/commitptr/store"
)

// InterruptedPuts cancels puts of a few large objects at random points,
// trials times, and then checks with uploads, which lists the store's
// incomplete multipart uploads, that none is left: every upload a Put
// started is aborted before the Put returns, even when its context was
// cancelled. size must be large enough for a multipart upload.
func InterruptedPuts(t *testing.T, s store.Store, size int64, trials int, uploads func(t *testing.T) []string) {
	body := make([]byte, size)
	putAll := func(ctx context.Context, prefix string) []error {
		const files = 3
		errs := make([]error, files)
		var wg sync.WaitGroup
		for i := range files {
			wg.Go(func() {
				_, errs[i] = s.Put(ctx, fmt.Sprintf("%sf%d", prefix, i), bytes.NewReader(body), store.PutOptions{Size: size})
			})
		}
		wg.Wait()
		return errs
	}
	// Interruption points are drawn from the time an uninterrupted put
	// takes on this machine now.
	start := time.Now()
	for _, err := range putAll(context.Background(), "whole/") {
		require.NoError(t, err)
	}
	whole := time.Since(start)
	seed := uint64(time.Now().UnixNano())
	t.Logf("an uninterrupted put of 3 × %d bytes took %s; seed %d", size, whole.Round(time.Millisecond), seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	interrupted := 0
	// A trial whose puts all end before their cancel shows that puts got
	// faster (the machine's load dropped): later points are drawn from
	// that trial's time. Without an interrupted put yet, trials go on, up
	// to four times as many.
	for trial := 0; trial < trials || (interrupted == 0 && trial < 4*trials); trial++ {
		ctx, cancel := context.WithCancel(context.Background())
		at := time.Duration(rng.Int64N(int64(whole)))
		timer := time.AfterFunc(at, cancel)
		begin := time.Now()
		errs := putAll(ctx, fmt.Sprintf("trial-%d/", trial))
		took := time.Since(begin)
		timer.Stop()
		cancel()
		failed := 0
		for _, err := range errs {
			if err != nil {
				failed++
			}
		}
		if failed > 0 {
			interrupted++
		} else if took < whole {
			whole = took
		}
		t.Logf("trial %d: cancelled after %s, %d of %d puts failed (they took %s)", trial, at.Round(time.Millisecond), failed, len(errs), took.Round(time.Millisecond))
	}
	assert.Positive(t, interrupted, "no trial interrupted a put")
	assert.Empty(t, uploads(t), "incomplete multipart uploads left by interrupted puts")
}

// SettledParts cancels a multipart Put while the network holds one of its
// parts, whose body it has in full, and checks that the driver sends no
// abort of the upload until that part is answered, and that no upload is
// left. open returns a store that sends its requests through rt. size
// must be large enough for a multipart upload.
//
// A driver that aborts at once can be told only by its abort arriving
// while the part is held; the test waits for that at most noticed, so a
// loaded machine makes it less sensitive, never flaky.
func SettledParts(t *testing.T, open func(rt http.RoundTripper) store.Store, size int64, uploads func(t *testing.T) []string) {
	const noticed = 2 * time.Second
	h := faults.NewPartHolder(nil)
	defer h.Wait()
	defer h.Release()
	s := open(h)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.Put(ctx, "held/f", bytes.NewReader(make([]byte, size)), store.PutOptions{Size: size})
		done <- err
	}()
	select {
	case <-h.Held():
	case err := <-done:
		t.Fatalf("the put ended before any part was sent: %v", err)
	}
	cancel()
	var err error
	returned := false
	select {
	case err = <-done:
		returned = true
	case <-time.After(noticed):
	}
	h.Release()
	if !returned {
		err = <-done
	}
	require.ErrorIs(t, err, context.Canceled)
	h.Wait()
	assert.Zero(t, h.EarlyAborts(), "the upload was aborted while a part it had sent in full was unanswered")
	assert.Empty(t, uploads(t), "incomplete multipart uploads left by the cancelled put")
}
