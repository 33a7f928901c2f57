package main

import (
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress is a progress bar on stderr, shown when stderr is a terminal or
// --progress asks for it, never with -q or --json. It counts files as well
// as bytes, in the units of the summary line (KiB, MiB), and shows an ETA
// only once a second has passed and bytes have moved, so that there is a
// rate to predict from. A nil *progress does nothing, so callers need not
// check.
type progress struct {
	bar   *progressbar.ProgressBar
	verb  string
	start time.Time
	mu    sync.Mutex
	files int // files done
	nfile int // files in all
	done  int64
	total int64
}

// newProgress returns a bar for nfiles files of total bytes, or, when
// inBytes is false, for a count of total items (nfiles is then unused).
func newProgress(w io.Writer, g *globalOptions, total int64, nfiles int, verb string, inBytes bool) *progress {
	if g.JSON || g.Quiet || total <= 0 || !(g.Progress || isTerminal(w)) {
		return nil
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(verb),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionUseIECUnits(true),
		progressbar.OptionThrottle(100 * time.Millisecond),
	}
	if inBytes {
		opts = append(opts, progressbar.OptionShowBytes(true), progressbar.OptionShowCount(), progressbar.OptionShowTotalBytes(true))
	} else {
		opts = append(opts, progressbar.OptionShowCount())
		nfiles = 0
	}
	p := &progress{verb: verb, start: time.Now(), nfile: nfiles, total: total}
	p.bar = progressbar.NewOptions64(total, opts...)
	p.bar.Describe(p.describe())
	return p
}

// describe is the text before the bar: the verb, files done of all, and
// the ETA once there is a rate.
func (p *progress) describe() string {
	d := p.verb
	if p.nfile > 0 {
		d = fmt.Sprintf("%s %d/%d files", d, p.files, p.nfile)
	}
	if el := time.Since(p.start); el >= time.Second && p.done > 0 && p.done < p.total {
		rate := float64(p.done) / el.Seconds()
		eta := time.Duration(float64(p.total-p.done) / rate * float64(time.Second))
		d = fmt.Sprintf("%s, ETA %s", d, eta.Round(time.Second))
	}
	return d
}

// Add counts n more units: bytes of one finished file, or items.
func (p *progress) Add(n int64) {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.files++
	p.done += n
	p.bar.Describe(p.describe())
	p.bar.Add64(n) //nolint:errcheck // display only
}

func (p *progress) Finish() {
	if p != nil {
		p.bar.Finish() //nolint:errcheck // display only
	}
}
