// Command leader-election runs one worker of a group that elects a leader
// through a lease on the store. The worker waits for the lease, leads for a
// while, and steps down; it does that for a number of terms. Each term gets
// a fencing token that is larger than every earlier one. The leader's work
// is a commit to the dataset made with that token as its fence, so a leader
// that lost its lease without noticing can never overwrite the work of a
// newer one: the commit is refused (commit.ErrFenced).
//
// Usage:
//
//	leader-election [-id NAME] [-terms N] [-hold D] [-ttl D] [-check DIR] URL
//
// Each term prints "NAME leader token T" when elected and "NAME steps down
// token T" when done. The work appends "T NAME" to the file leaders.log of
// the dataset. With -check DIR, a leader also creates DIR/leader while it
// leads and fails if it already exists: proof that no two lead at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/commitptr/commitptr"
	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/lease"
)

func main() {
	id := flag.String("id", fmt.Sprintf("worker-%d", os.Getpid()), "this worker's name")
	terms := flag.Int("terms", 2, "terms to lead before exiting")
	hold := flag.Duration("hold", 200*time.Millisecond, "how long to lead per term")
	ttl := flag.Duration("ttl", 5*time.Second, "lease TTL")
	check := flag.String("check", "", "a local directory in which to prove mutual exclusion")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: leader-election [-id NAME] [-terms N] [-hold D] [-ttl D] [-check DIR] URL")
		os.Exit(2)
	}
	log.SetFlags(0)
	ctx := context.Background()
	d, err := commitptr.Open(ctx, flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	for range *terms {
		if err := term(ctx, d, *id, *hold, *ttl, *check); err != nil {
			log.Fatalf("%s: %v", *id, err)
		}
	}
}

// term waits to be elected, leads for hold, and steps down.
func term(ctx context.Context, d *commit.Dataset, id string, hold, ttl time.Duration, check string) error {
	l, err := lease.Acquire(ctx, d.Store(), "leader", lease.Options{TTL: ttl, Owner: id, PollMin: 20 * time.Millisecond, PollMax: 200 * time.Millisecond})
	if err != nil {
		return err
	}
	defer l.Release(ctx) //nolint:errcheck // if it fails, the lease expires after its TTL
	l.KeepAlive(ctx)
	fmt.Printf("%s leader token %d\n", id, l.Token())

	if check != "" {
		marker := filepath.Join(check, "leader")
		if err := os.Mkdir(marker, 0o755); err != nil {
			return fmt.Errorf("another leader is active (token %d): %w", l.Token(), err)
		}
		defer os.Remove(marker)
	}

	if err := work(ctx, d, l, id); err != nil {
		return err
	}
	select {
	case <-time.After(hold):
	case <-l.Done():
		return fmt.Errorf("lost the lease: %w", l.Err())
	}
	fmt.Printf("%s steps down token %d\n", id, l.Token())
	return nil
}

// work appends a line to leaders.log, committed with the lease's token as
// fence.
func work(ctx context.Context, d *commit.Dataset, l *lease.Lease, id string) error {
	_, err := d.Update(ctx, commit.CommitOptions{Fence: l.Token(), Message: id}, func(ctx context.Context, tx *commit.Tx) error {
		var old []byte
		if snap, err := tx.BaseSnapshot(ctx); err == nil {
			if old, err = snap.ReadFile(ctx, "leaders.log"); err != nil && !errors.Is(err, commit.ErrNotFound) {
				return err
			}
		} else if !errors.Is(err, commit.ErrNoCommits) {
			return err
		}
		return tx.PutBytes(ctx, "leaders.log", fmt.Appendf(old, "%d %s\n", l.Token(), id))
	})
	return err
}
