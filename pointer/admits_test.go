package pointer

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

func TestAdmitsTheLeasesFenceAndAbove(t *testing.T) {
	p := &Pointer{Fence: 5, Fences: map[string]uint64{"a": 9}}
	cases := []struct {
		token uint64
		lease string
		want  bool
	}{
		{4, "", false}, {5, "", true}, {6, "", true},
		{8, "a", false}, {9, "a", true}, {10, "a", true},
		{1, "b", true}, // a lease the pointer has no fence of
		{0, "", true}, {0, "a", true},
	}
	for _, c := range cases {
		if got := p.Admits(c.token, c.lease); got != c.want {
			t.Errorf("fences %d/%v: Admits(%d, %q) = %v, want %v", p.Fence, p.Fences, c.token, c.lease, got, c.want)
		}
	}
	p.FencedOnly = true
	for _, lease := range []string{"", "a", "b"} {
		if p.Admits(0, lease) {
			t.Errorf("a pointer taking fenced writers only admits a commit without a token (lease %q)", lease)
		}
	}
	if !p.Admits(9, "a") {
		t.Error("a pointer taking fenced writers only refuses a token at its lease's fence")
	}
}

// TestAdmitsProperties checks, over random pointers: a raised fence admits
// its own token and refuses the one below; admission only grows with the
// token; another lease's fence never matters; and only a commit without a
// token depends on FencedOnly.
func TestAdmitsProperties(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	leases := []string{"", "a", "b", "c"}
	for i := range 20000 {
		p := &Pointer{FencedOnly: rnd.IntN(2) == 0}
		for _, l := range leases {
			if rnd.IntN(2) == 0 {
				p.RaiseFence(l, 1+rnd.Uint64N(20))
			}
		}
		lease := leases[rnd.IntN(len(leases))]
		token := 1 + rnd.Uint64N(25)
		where := fmt.Sprintf("case %d: fences %d/%v, fenced only %v, lease %q, token %d", i, p.Fence, p.Fences, p.FencedOnly, lease, token)

		if p.Admits(token, lease) && !p.Admits(token+1+rnd.Uint64N(5), lease) {
			t.Fatalf("%s: a higher token is refused", where)
		}
		q := *p
		q.RaiseFence(lease, token)
		if q.FenceOf(lease) >= token && !q.Admits(q.FenceOf(lease), lease) {
			t.Fatalf("%s: the lease's own fence is refused", where)
		}
		if f := q.FenceOf(lease); f > 1 && q.Admits(f-1, lease) {
			t.Fatalf("%s: a token below the lease's fence %d is admitted", where, f)
		}
		other := leases[rnd.IntN(len(leases))]
		if other != lease {
			r := *p
			r.RaiseFence(other, 100)
			if r.Admits(token, lease) != p.Admits(token, lease) {
				t.Fatalf("%s: raising lease %q's fence changed lease %q's admission", where, other, lease)
			}
		}
		flipped := *p
		flipped.FencedOnly = !p.FencedOnly
		if flipped.Admits(token, lease) != p.Admits(token, lease) {
			t.Fatalf("%s: a commit with a token depends on FencedOnly", where)
		}
		if p.Admits(0, lease) == p.FencedOnly {
			t.Fatalf("%s: a commit without a token is admitted %v", where, p.Admits(0, lease))
		}
	}
}
