package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/store"
)

// gcRunStats is the line gc --every prints after each run; --json prints
// it as one JSON object per line.
type gcRunStats struct {
	Run int `json:"run"`
	// Outcome is "ok", "held" (another collector has the lease), "busy"
	// (commits kept beating the collector), "lost" (the lease was lost
	// mid-run), "refused" (a corrupt or unreadable pointer or manifest)
	// or "failed".
	Outcome        string  `json:"outcome"`
	Seq            uint64  `json:"seq,omitempty"`
	Generations    int     `json:"generations"`
	Orphans        int     `json:"orphans"`
	ObjectsDeleted int     `json:"objects_deleted"`
	BytesDeleted   int64   `json:"bytes_deleted"`
	Left           int     `json:"left"`
	PinsDropped    int     `json:"pins_dropped"`
	Requests       int64   `json:"requests"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	Error          string  `json:"error,omitempty"`
}

// runGCEvery collects, sleeps opts.Every with ±10 % jitter, and collects
// again until ctx ends (SIGTERM, SIGINT), which ends it with no error. A
// failed run is reported on its line and does not end the loop.
func runGCEvery(ctx context.Context, s store.Store, gopts gc.Options, opts gcOptions, stdout io.Writer) error {
	for run := 1; ; run++ {
		start := time.Now()
		rep, err := gc.Run(ctx, s, gopts)
		if ctx.Err() != nil && (err == nil || errors.Is(err, context.Canceled)) {
			return nil // stopped by a signal; the lease is released
		}
		st := newGCRunStats(run, rep, err, time.Since(start), opts.Verbose)
		if werr := st.write(stdout, opts.JSON); werr != nil {
			return werr
		}
		pause := opts.Every + time.Duration((rand.Float64()-0.5)*0.2*float64(opts.Every))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(pause):
		}
	}
}

func newGCRunStats(run int, rep *gc.Report, err error, took time.Duration, verbose int) gcRunStats {
	st := gcRunStats{Run: run, Outcome: "ok", ElapsedSeconds: took.Seconds()}
	if rep != nil {
		st.Seq = rep.Seq
		st.Generations, st.Orphans = len(rep.Deleted), len(rep.Orphans)
		st.ObjectsDeleted, st.BytesDeleted, st.Left = rep.ObjectsDeleted, rep.BytesDeleted, rep.Left
		st.PinsDropped, st.Requests = rep.PinsDropped, rep.Requests.Total()
	}
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrHeld):
		st.Outcome = "held"
	case errors.Is(err, gc.ErrBusy):
		st.Outcome = "busy"
	case errors.Is(err, lease.ErrLost):
		st.Outcome = "lost"
	case errors.Is(err, gc.ErrRefused):
		st.Outcome = "refused"
	default:
		st.Outcome = "failed"
	}
	if err != nil {
		st.Error = tidyMessage(err.Error(), verbose)
	}
	return st
}

// write prints the stats as one line, e.g. "gc: run 3 ok at seq 42: 120
// objects deleted (3 generations, 1 orphan, 10.2 KiB), 0 left, 1 pin
// dropped; 152 requests, 0.4s".
func (st gcRunStats) write(w io.Writer, asJSON bool) error {
	if asJSON {
		b, err := json.Marshal(st)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(w, "%s\n", b)
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "gc: run %d %s", st.Run, st.Outcome)
	if st.Seq > 0 {
		fmt.Fprintf(&b, " at seq %d", st.Seq)
	}
	fmt.Fprintf(&b, ": %s deleted (%s, %s, %s), %d left, %s dropped; %s, %s",
		plural(st.ObjectsDeleted, "object"), plural(st.Generations, "generation"), plural(st.Orphans, "orphan"),
		humanBytes(st.BytesDeleted), st.Left, plural(st.PinsDropped, "pin"), plural(int(st.Requests), "request"),
		roundElapsed(time.Duration(st.ElapsedSeconds*float64(time.Second))))
	if st.Error != "" {
		fmt.Fprintf(&b, "; %s", st.Error)
	}
	_, err := fmt.Fprintln(w, b.String())
	return err
}
