// Command batch-publish is a batch job that ends by publishing its output
// atomically: it writes a few files into a scratch directory, then stages
// and commits them as the next generation of the dataset at URL. Readers
// see either the previous output or the new one, never a mix.
//
// Usage:
//
//	batch-publish [-runs N] URL
//
// Each run prints "run I: committed seq S generation G (F files, R reused)".
// A run that loses the race to another writer prints "run I: lost the race"
// and the program exits with status 3, as `publish put` does.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/commitptr/commitptr"
	"github.com/commitptr/commitptr/commit"
)

func main() {
	runs := flag.Int("runs", 1, "how many batch runs to publish, one after another")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: batch-publish [-runs N] URL")
		os.Exit(2)
	}
	log.SetFlags(0)
	ctx := context.Background()
	d, err := commitptr.Open(ctx, flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	for i := 1; i <= *runs; i++ {
		out, err := os.MkdirTemp("", "batch-out-")
		if err != nil {
			log.Fatal(err)
		}
		if err := produce(out, i); err != nil {
			log.Fatal(err)
		}
		err = publish(ctx, d, out, i)
		os.RemoveAll(out)
		if errors.Is(err, commit.ErrConflict) {
			fmt.Printf("run %d: lost the race: %v\n", i, err)
			os.Exit(3)
		}
		if err != nil {
			log.Fatal(err)
		}
	}
}

// produce writes the output of batch run i: a report that changes every
// run and a reference file that never does (an incremental publish reuses
// it instead of uploading it again).
func produce(dir string, run int) error {
	files := map[string]string{
		"report.csv":       fmt.Sprintf("run,total\n%d,%d\n", run, run*100),
		"parts/part-0000":  fmt.Sprintf("part 0 of run %d\n", run),
		"reference/lookup": "static reference data\n",
		"_SUCCESS":         "",
	}
	for name, body := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// publish stages the directory as a new generation and commits it.
func publish(ctx context.Context, d *commit.Dataset, dir string, run int) error {
	tx, err := d.Begin(ctx)
	if err != nil {
		return err
	}
	if err := tx.AddDir(ctx, dir); err != nil {
		tx.Discard(ctx) //nolint:errcheck // best effort; the collector's orphan sweep is the backstop
		return err
	}
	p, err := tx.Commit(ctx, commit.CommitOptions{Message: fmt.Sprintf("batch run %d", run)})
	if err != nil {
		return err // on ErrConflict, Commit already discarded what it staged
	}
	fmt.Printf("run %d: committed seq %d generation %s (%d files, %d reused)\n",
		run, p.Seq, p.Generation, len(tx.Files()), tx.Reused())
	return nil
}
