package gc_test

import (
	"context"
	"fmt"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/store"
	"github.com/commitptr/commitptr/store/mem"
)

// ExampleRun publishes five generations and collects all but the current
// one and its parent.
func ExampleRun() {
	ctx := context.Background()
	s := mem.New()
	d := commit.New(s)
	for i := range 5 {
		tx, _ := d.Begin(ctx)
		_ = tx.PutBytes(ctx, "data.csv", fmt.Appendf(nil, "version %d\n", i))
		if _, err := tx.Commit(ctx, commit.CommitOptions{}); err != nil {
			fmt.Println(err)
			return
		}
	}

	rep, err := gc.Run(ctx, s, gc.Options{Keep: 1, Grace: -1})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("kept %d generations, deleted %d: %d objects in %d delete request(s)\n",
		len(rep.Kept), len(rep.Deleted), rep.ObjectsDeleted, rep.Requests[store.OpDeleteMany])
	// Output:
	// kept 2 generations, deleted 3: 6 objects in 2 delete request(s)
}
