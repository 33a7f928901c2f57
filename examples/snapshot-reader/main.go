// Command snapshot-reader shows that readers see exactly one generation
// while commits land. A writer commits generations 1..N of a small dataset
// in which every file of generation k says "k"; at the same time a reader
// opens snapshots over and over and checks that all files of each snapshot
// agree. A torn read (files from two generations) would be reported and
// make the program exit with status 1.
//
// Usage:
//
//	snapshot-reader [-commits N] [-files F] URL
//
// It prints "writer: N commits" and "reader: M snapshots, each consistent,
// seqs A..B".
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"sync"

	"github.com/commitptr/commitptr"
	"github.com/commitptr/commitptr/commit"
)

func main() {
	commits := flag.Int("commits", 20, "generations the writer commits")
	files := flag.Int("files", 4, "files per generation")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: snapshot-reader [-commits N] [-files F] URL")
		os.Exit(2)
	}
	log.SetFlags(0)
	ctx := context.Background()
	d, err := commitptr.Open(ctx, flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}

	done := make(chan struct{})
	var wg sync.WaitGroup
	var writeErr error
	wg.Go(func() {
		defer close(done)
		writeErr = write(ctx, d, *commits, *files)
	})

	reads, first, last := 0, uint64(0), uint64(0)
	for running := true; running; {
		select {
		case <-done:
			running = false // one more read after the last commit
		default:
		}
		seq, err := read(ctx, d)
		if err != nil {
			fmt.Println("reader:", err)
			os.Exit(1)
		}
		if seq == 0 {
			continue // no commit yet
		}
		if reads == 0 {
			first = seq
		}
		reads, last = reads+1, seq
	}
	wg.Wait()
	if writeErr != nil {
		log.Fatal(writeErr)
	}
	fmt.Printf("writer: %d commits\n", *commits)
	fmt.Printf("reader: %d snapshots, each consistent, seqs %d..%d\n", reads, first, last)
}

// write commits generations 1..n, each with files that all say the
// generation's number.
func write(ctx context.Context, d *commit.Dataset, n, files int) error {
	for k := 1; k <= n; k++ {
		tx, err := d.Begin(ctx)
		if err != nil {
			return err
		}
		for f := range files {
			if err := tx.PutBytes(ctx, fmt.Sprintf("part-%d", f), []byte(strconv.Itoa(k))); err != nil {
				return err
			}
		}
		if _, err := tx.Commit(ctx, commit.CommitOptions{Message: "generation " + strconv.Itoa(k)}); err != nil {
			return err
		}
	}
	return nil
}

// read opens the current snapshot and checks that its files agree. It
// returns 0 while the dataset has no commits.
func read(ctx context.Context, d *commit.Dataset) (uint64, error) {
	snap, err := d.Open(ctx)
	if err != nil {
		if errors.Is(err, commit.ErrNoCommits) {
			return 0, nil
		}
		return 0, err
	}
	want := ""
	for _, e := range snap.Files() {
		b, err := snap.ReadFile(ctx, e.Path)
		if err != nil {
			return 0, err
		}
		if want == "" {
			want = string(b)
		}
		if string(b) != want {
			return 0, fmt.Errorf("torn read in seq %d: %s says %q, another file says %q", snap.Seq(), e.Path, b, want)
		}
	}
	if want != strconv.FormatUint(snap.Seq(), 10) {
		return 0, fmt.Errorf("seq %d holds the files of generation %q", snap.Seq(), want)
	}
	return snap.Seq(), nil
}
