package main

import (
	"io"

	"github.com/schollz/progressbar/v3"
)

// progress is a progress bar on stderr, shown only when stderr is a
// terminal. A nil *progress does nothing, so callers need not check.
type progress struct{ bar *progressbar.ProgressBar }

// newProgress returns a bar for total units (bytes if inBytes), or nil when
// w is not a terminal or JSON output was asked for.
func newProgress(w io.Writer, g *globalOptions, total int64, desc string, inBytes bool) *progress {
	if g.JSON || !isTerminal(w) || total <= 0 {
		return nil
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(desc),
		progressbar.OptionSetWidth(30),
		progressbar.OptionClearOnFinish(),
		progressbar.OptionShowCount(),
		progressbar.OptionSetPredictTime(true),
	}
	if inBytes {
		opts = append(opts, progressbar.OptionShowBytes(true))
	}
	return &progress{bar: progressbar.NewOptions64(total, opts...)}
}

func (p *progress) Add(n int64) {
	if p != nil {
		p.bar.Add64(n) //nolint:errcheck // display only
	}
}

func (p *progress) Finish() {
	if p != nil {
		p.bar.Finish() //nolint:errcheck // display only
	}
}
