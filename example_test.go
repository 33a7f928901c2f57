package commitptr_test

import (
	"context"
	"fmt"
	"log"

	"github.com/commitptr/commitptr"
	"github.com/commitptr/commitptr/commit"
)

func ExampleOpen() {
	ctx := context.Background()
	d, err := commitptr.Open(ctx, "mem://example/daily")
	if err != nil {
		log.Fatal(err)
	}

	// Publish one generation: stage, then commit with one pointer CAS.
	tx, err := d.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	if err := tx.PutBytes(ctx, "report.csv", []byte("day,total\n1,42\n")); err != nil {
		log.Fatal(err)
	}
	p, err := tx.Commit(ctx, commit.CommitOptions{Message: "day 1"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("committed seq", p.Seq)

	// Read it back as a snapshot: exactly one generation, verified.
	snap, err := d.Open(ctx)
	if err != nil {
		log.Fatal(err)
	}
	b, err := snap.ReadFile(ctx, "report.csv")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("seq %d, %d file(s):\n%s", snap.Seq(), len(snap.Files()), b)
	// Output:
	// committed seq 1
	// seq 1, 1 file(s):
	// day,total
	// 1,42
}
