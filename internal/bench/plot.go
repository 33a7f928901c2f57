package bench

import (
	"bytes"
	"fmt"
	"time"
)

// ContentionSVG draws the contention curve: goodput (commits/s, left axis)
// and p99 latency (ms, right axis) against the number of writers, as a
// self-contained SVG image.
func ContentionSVG(rs []Result) []byte {
	const w, h, left, right, top, bottom = 640, 360, 60, 60, 30, 50
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	var maxGood, maxP99 float64
	for _, r := range rs {
		maxGood = max(maxGood, r.PerSecond)
		maxP99 = max(maxP99, float64(r.P99)/float64(time.Millisecond))
	}
	maxGood, maxP99 = niceCeil(maxGood), niceCeil(maxP99)
	x := func(i int) float64 {
		if len(rs) < 2 {
			return left + pw/2
		}
		return left + pw*float64(i)/float64(len(rs)-1)
	}
	yGood := func(v float64) float64 { return top + ph*(1-v/maxGood) }
	yP99 := func(v float64) float64 { return top + ph*(1-v/maxP99) }

	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="18" text-anchor="middle" font-size="14">commitptr contention: goodput and p99 by writers</text>`+"\n", w/2)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#888"/>`+"\n", left, top, pw, ph)
	for i := 0; i <= 4; i++ {
		f := float64(i) / 4
		y := top + ph*(1-f)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" fill="#1f77b4">%.0f</text>`+"\n", left-6, y+4, maxGood*f)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" fill="#d62728">%.0f</text>`+"\n", w-right+6, y+4, maxP99*f)
	}
	for i, r := range rs {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.0f</text>`+"\n", x(i), h-bottom+16, r.Extra["writers"])
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">writers</text>`+"\n", w/2, h-12)
	fmt.Fprintf(&b, `<text x="14" y="%d" fill="#1f77b4" transform="rotate(-90 14 %d)" text-anchor="middle">commits/s</text>`+"\n", h/2, h/2)
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#d62728" transform="rotate(90 %d %d)" text-anchor="middle">p99 ms</text>`+"\n", w-14, h/2, w-14, h/2)
	line := func(color string, y func(Result) float64) {
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="`, color)
		for i, r := range rs {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(i), y(r))
		}
		b.WriteString(`"/>` + "\n")
		for i, r := range rs {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(i), y(r), color)
		}
	}
	line("#1f77b4", func(r Result) float64 { return yGood(r.PerSecond) })
	line("#d62728", func(r Result) float64 { return yP99(float64(r.P99) / float64(time.Millisecond)) })
	b.WriteString("</svg>\n")
	return b.Bytes()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := 1.0
	for p*10 <= v {
		p *= 10
	}
	for p > v {
		p /= 10
	}
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

// PartitionsSVG draws goodput (commits/s) against the number of writers
// for disjoint writers with group commit (blue), rebase alone (orange) and
// no rebase (grey), side by side, as a self-contained SVG image. Each
// slice holds one result per writer count, in the same order; an empty
// one is not drawn.
func PartitionsSVG(group, alone, off []Result) []byte {
	const w, h, left, right, top, bottom = 640, 360, 60, 30, 30, 50
	pw, ph := float64(w-left-right), float64(h-top-bottom)
	var maxGood float64
	labels := group
	for _, rs := range [][]Result{group, alone, off} {
		for _, r := range rs {
			maxGood = max(maxGood, r.PerSecond)
		}
		if len(rs) > len(labels) {
			labels = rs
		}
	}
	maxGood = niceCeil(maxGood)
	n := len(labels)
	x := func(i int) float64 {
		if n < 2 {
			return left + pw/2
		}
		return left + pw*float64(i)/float64(n-1)
	}
	y := func(v float64) float64 { return top + ph*(1-v/maxGood) }
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	fmt.Fprintf(&b, `<text x="%d" y="18" text-anchor="middle" font-size="14">disjoint writers: group commit (blue), rebase alone (orange), no rebase (grey)</text>`+"\n", w/2)
	fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%.0f" height="%.0f" fill="none" stroke="#888"/>`+"\n", left, top, pw, ph)
	for i := 0; i <= 4; i++ {
		f := float64(i) / 4
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%.0f</text>`+"\n", left-6, top+ph*(1-f)+4, maxGood*f)
	}
	for i, r := range labels {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle">%.0f</text>`+"\n", x(i), h-bottom+16, r.Extra["writers"])
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">writers</text>`+"\n", w/2, h-12)
	fmt.Fprintf(&b, `<text x="14" y="%d" transform="rotate(-90 14 %d)" text-anchor="middle">commits/s</text>`+"\n", h/2, h/2)
	for _, s := range []struct {
		color string
		rs    []Result
	}{{"#1f77b4", group}, {"#ff7f0e", alone}, {"#7f7f7f", off}} {
		if len(s.rs) == 0 {
			continue
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="`, s.color)
		for i, r := range s.rs {
			fmt.Fprintf(&b, "%.1f,%.1f ", x(i), y(r.PerSecond))
		}
		b.WriteString(`"/>` + "\n")
		for i, r := range s.rs {
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s"/>`+"\n", x(i), y(r.PerSecond), s.color)
		}
	}
	b.WriteString("</svg>\n")
	return b.Bytes()
}
