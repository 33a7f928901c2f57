package store

import (
	"fmt"
	"strconv"
	"strings"
)

// KeyListShown is how many keys KeyList names: enough to find a failed
// batch's keys in a log, few enough to keep the error on one line.
const KeyListShown = 5

// KeyList formats keys for an error message, as the drivers report a batch
// that failed in part: the first KeyListShown keys quoted and separated by
// commas, then how many more there are.
func KeyList(keys []string) string {
	var b strings.Builder
	for i, k := range keys {
		if i == KeyListShown {
			fmt.Fprintf(&b, " and %d more", len(keys)-KeyListShown)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Quote(k))
	}
	return b.String()
}
