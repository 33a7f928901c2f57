// Command rmw-counter increments a counter in one shared object, N times,
// with read-modify-write: read the object and its ETag, add one, write it
// back only if the ETag is unchanged, and retry when another process won.
// Run several at once against the same URL and KEY: no increment is lost,
// and the final value is the total of all increments.
//
// Usage:
//
//	rmw-counter [-n N] URL KEY
//
// It prints "incremented N times; last value V".
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/commitptr/commitptr"
	"github.com/commitptr/commitptr/object"
)

func main() {
	n := flag.Int("n", 10, "increments to make")
	flag.Parse()
	if flag.NArg() != 2 {
		fmt.Fprintln(os.Stderr, "usage: rmw-counter [-n N] URL KEY")
		os.Exit(2)
	}
	log.SetFlags(0)
	ctx := context.Background()
	d, err := commitptr.Open(ctx, flag.Arg(0))
	if err != nil {
		log.Fatal(err)
	}
	// Contended writers need more attempts than the default.
	retry := object.Retry{Attempts: 100, Base: 5 * time.Millisecond, Max: 500 * time.Millisecond}
	var last int
	for range *n {
		_, err := object.Update(ctx, d.Store(), flag.Arg(1), retry, func(old []byte, exists bool) ([]byte, error) {
			v := 0
			if exists {
				var err error
				if v, err = strconv.Atoi(strings.TrimSpace(string(old))); err != nil {
					return nil, fmt.Errorf("counter holds %q: %w", old, err)
				}
			}
			last = v + 1 // fn may run again on a lost race; the last run is the one written
			return []byte(strconv.Itoa(last) + "\n"), nil
		})
		if err != nil {
			log.Fatal(err)
		}
	}
	fmt.Printf("incremented %d times; last value %d\n", *n, last)
}
