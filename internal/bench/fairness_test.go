package bench

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestFairnessIsTheLeastWriterOverTheMean: 1 when every writer committed
// as often, the fewest over the mean otherwise, 0 when one never did.
func TestFairnessIsTheLeastWriterOverTheMean(t *testing.T) {
	for _, c := range []struct {
		successes []int
		want      float64
	}{
		{[]int{5}, 1},
		{[]int{20, 20, 20, 20}, 1},
		{[]int{10, 30}, 0.5},
		{[]int{1, 28, 0, 28}, 0},
		{[]int{0, 0}, 0},
	} {
		assert.InDelta(t, c.want, fairness(c.successes), 1e-9, "%v", c.successes)
	}
}
