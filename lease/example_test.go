package lease_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/store/mem"
)

func ExampleTryAcquire() {
	ctx := context.Background()
	s := mem.New()

	l, err := lease.TryAcquire(ctx, s, "gc", lease.Options{Owner: "worker-1", TTL: 30 * time.Second})
	if err != nil {
		panic(err)
	}
	l.KeepAlive(ctx)
	fmt.Println("worker-1 holds token", l.Token())

	_, err = lease.TryAcquire(ctx, s, "gc", lease.Options{Owner: "worker-2"})
	var held *lease.HeldError
	if errors.As(err, &held) {
		fmt.Println("worker-2: held by", held.Owner)
	}

	// ... work while l.Held(), committing with
	// commit.CommitOptions{Fence: l.Token()} ...

	if err := l.Release(ctx); err != nil {
		panic(err)
	}
	l2, err := lease.TryAcquire(ctx, s, "gc", lease.Options{Owner: "worker-2"})
	if err != nil {
		panic(err)
	}
	defer l2.Release(ctx)
	fmt.Println("worker-2 holds token", l2.Token())
	// Output:
	// worker-1 holds token 1
	// worker-2: held by worker-1
	// worker-2 holds token 2
}

func ExampleAcquireEpoch() {
	ctx := context.Background()
	s := mem.New()
	for _, owner := range []string{"a", "b", "c"} {
		e, err := lease.AcquireEpoch(ctx, s, "leader", lease.Options{Owner: owner})
		if err != nil {
			panic(err)
		}
		fmt.Println(owner, "leads in epoch", e.Epoch(), "at", e.Key())
		e.Release(ctx)
	}
	// Output:
	// a leads in epoch 1 at _lease/leader/0000000001
	// b leads in epoch 2 at _lease/leader/0000000002
	// c leads in epoch 3 at _lease/leader/0000000003
}
