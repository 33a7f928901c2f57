package gc

import (
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/commitptr/commitptr/store"
)

// Report is what a collection kept and deleted. In a dry run it is the plan:
// the counts say what a real run would delete.
type Report struct {
	// Seq and Generation are those of the pointer the collection was
	// planned from; zero when the dataset has no pointer.
	Seq        uint64 `json:"seq,omitempty"`
	Generation string `json:"generation,omitempty"`
	// Kept lists the generations kept: retained ones, generations still
	// being staged, and the remains of collected generations whose
	// objects retained generations still reference.
	Kept []GenInfo `json:"kept"`
	// Deleted lists the superseded chain generations the plan deletes, and
	// Orphans the generations outside the chain. Their Objects and Bytes
	// count only the objects deleted: shared objects are kept.
	Deleted []GenInfo `json:"deleted"`
	Orphans []GenInfo `json:"orphans"`
	// Planned is the number of generation objects the plan deletes;
	// ObjectsDeleted and BytesDeleted count those actually deleted (in a
	// dry run, those that would be).
	Planned        int   `json:"planned"`
	ObjectsDeleted int   `json:"objects_deleted"`
	BytesDeleted   int64 `json:"bytes_deleted"`
	// Left counts the objects to collect that this run left for the next
	// because of Options.MaxDelete or Options.Budget.
	Left int `json:"left,omitempty"`
	// PinsDropped counts expired pins deleted, EpochsDropped old lease
	// epochs.
	PinsDropped   int `json:"pins_dropped"`
	EpochsDropped int `json:"epochs_dropped"`
	// IntentsDropped counts group-commit intents deleted that no commit
	// could carry any more (bound to a pointer value that is gone).
	IntentsDropped int `json:"intents_dropped,omitempty"`
	// JobsDropped counts the jobs whose records were deleted: jobs that
	// can no longer commit (the horizon passed their staging start), and
	// the records left of finished jobs, older than the orphan age.
	JobsDropped int `json:"jobs_dropped,omitempty"`
	// Leftovers counts the pieces of writes interrupted more than the
	// orphan age ago that the driver removed: the fs driver's temp files,
	// incomplete S3 multipart uploads. Their requests are in Requests too.
	// A dry run does not look for them.
	Leftovers store.Leftovers `json:"leftovers"`
	// Versions counts, on a bucket that keeps versions, the versions and
	// delete markers of the deleted generation objects that were deleted,
	// and the requests that took beside Requests (see store.Versioner).
	// BytesDeleted is then the size of those versions.
	Versions store.Freed `json:"versions,omitzero"`
	// Requests counts the store requests of the run, lease included.
	Requests store.Counts `json:"requests"`
	DryRun   bool         `json:"dry_run,omitempty"`
	// Horizon is the pointer's gc_horizon after the run (the one it would
	// publish, in a dry run); zero if none was ever published.
	Horizon time.Time `json:"horizon,omitzero"`
	// Notes are remarks for people: no pointer, history shorter than the
	// retention window, keys left alone because they were not understood.
	Notes []string `json:"notes,omitempty"`

	// noPointer: the run found no pointer. A report without a
	// Generation is otherwise that of a run that stopped before it
	// deleted anything: refused, or the lease held elsewhere.
	noPointer bool
}

// GenInfo describes one generation in a Report.
type GenInfo struct {
	Generation string `json:"generation"`
	// Seq is the generation's pointer sequence number; 0 when it is not
	// known (orphans, whose manifests are not read).
	Seq     uint64 `json:"seq,omitempty"`
	Objects int    `json:"objects"`
	Bytes   int64  `json:"bytes"`
	// Reason says why the generation was kept or deleted.
	Reason string `json:"reason"`
}

// WriteText writes a summary for people: the generations kept and deleted,
// with their objects and bytes, then the totals, the horizon and the
// requests made.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	switch {
	case r.noPointer:
		ew.printf("no pointer: nothing to collect\n")
	case r.Generation == "":
		ew.printf("not collected: the run stopped before it deleted anything\n")
	case r.DryRun:
		ew.printf("dry run at seq %d (generation %s); nothing was deleted\n", r.Seq, r.Generation)
	default:
		ew.printf("collected at seq %d (generation %s)\n", r.Seq, r.Generation)
	}
	verb := "deleted"
	if r.DryRun {
		verb = "would delete"
	}
	section := func(title string, gens []GenInfo) {
		if len(gens) == 0 {
			return
		}
		var objects int
		var bytes int64
		for _, g := range gens {
			objects += g.Objects
			bytes += g.Bytes
		}
		ew.printf("\n%s: %s, %s, %s\n", title, plural(len(gens), "generation"), plural(objects, "object"), FormatBytes(bytes))
		tw := tabwriter.NewWriter(ew, 2, 8, 2, ' ', 0)
		fmt.Fprintf(tw, "  SEQ\tGENERATION\tOBJECTS\tBYTES\tREASON\n")
		for _, g := range gens {
			seq := "-"
			if g.Seq != 0 {
				seq = strconv.FormatUint(g.Seq, 10)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", seq, g.Generation, g.Objects, FormatBytes(g.Bytes), g.Reason)
		}
		tw.Flush()
	}
	section("kept", r.Kept)
	section(verb+" (superseded)", r.Deleted)
	section(verb+" (orphans)", r.Orphans)
	if r.DryRun {
		ew.printf("\nobjects to delete: %d, %s\n", r.Planned, FormatBytes(r.BytesDeleted))
		ew.printf("expired pins to drop: %d\n", r.PinsDropped)
	} else {
		ew.printf("\nobjects deleted: %d of %d planned, %s\n", r.ObjectsDeleted, r.Planned, FormatBytes(r.BytesDeleted))
		if r.Left > 0 {
			ew.printf("left for the next run: %s\n", plural(r.Left, "object"))
		}
		ew.printf("expired pins dropped: %d, old lease epochs dropped: %d\n", r.PinsDropped, r.EpochsDropped)
		if r.JobsDropped > 0 {
			ew.printf("abandoned or finished jobs dropped: %d\n", r.JobsDropped)
		}
		if r.IntentsDropped > 0 {
			ew.printf("dead group-commit intents dropped: %d\n", r.IntentsDropped)
		}
		if r.Leftovers.Count > 0 {
			ew.printf("leftovers of interrupted writes removed: %d, %s\n", r.Leftovers.Count, FormatBytes(r.Leftovers.Bytes))
		}
		if v := r.Versions; v.Versioned {
			// BytesDeleted is then the size of the versions deleted.
			ew.printf("the bucket keeps versions: %s and %s deleted (%s)\n", plural(v.Versions, "version"), plural(v.Markers, "delete marker"), v.Requests)
			if v.Versions+v.Markers == 0 && r.ObjectsDeleted > 0 {
				ew.printf("note: the deletes only added delete markers (versioning=off was declared), so nothing was freed\n")
			}
		}
	}
	if !r.Horizon.IsZero() {
		ew.printf("gc horizon: %s\n", r.Horizon.UTC().Format(time.RFC3339))
	}
	ew.printf("requests: %s\n", r.Requests)
	for _, n := range r.Notes {
		ew.printf("note: %s\n", n)
	}
	return ew.err
}

// FormatBytes formats a byte count with binary units: "0 B", "1.5 KiB".
func FormatBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return strconv.FormatInt(n, 10) + " B"
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

// errWriter keeps the first write error.
type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func (e *errWriter) printf(format string, args ...any) { fmt.Fprintf(e, format, args...) }
