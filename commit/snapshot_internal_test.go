package commit

import (
	"fmt"
	"sync"
	"testing"
)

// TestHeldManifestIsSafeForConcurrentTxs has the Txs of one Dataset hold
// and look up manifests at once, with nothing else ordering them: a lookup
// returns the bytes held for exactly its generation and sha256, or none.
// Run it with -race.
func TestHeldManifestIsSafeForConcurrentTxs(t *testing.T) {
	var c lastManifest
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 500 {
				gen := fmt.Sprintf("%d-%d", w, i)
				c.put(gen, "sha-"+gen, []byte(gen))
				for _, look := range []string{gen, fmt.Sprintf("%d-%d", (w+1)%4, i)} {
					if b := c.get(look, "sha-"+look); b != nil && string(b) != look {
						t.Errorf("lookup of %s returned the bytes of %s", look, b)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}
