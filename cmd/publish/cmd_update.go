package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/object"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

type updateOptions struct {
	*globalOptions
	URL, Key string
	Command  []string
	Attempts int
	// AllowEmpty writes CMD's output even when it is empty.
	AllowEmpty bool
	stdin      io.Reader
}

func newUpdateCommand(g *globalOptions) *cobra.Command {
	opts := updateOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "update URL [KEY] -- CMD [ARG...]",
		Short: "Read-modify-write one shared object through a command",
		Long: `Update runs CMD with the current content of the object KEY in the store at
URL on its stdin, and writes CMD's stdout back as the object's new content
with a conditional write (If-Match on the ETag that was read, or
If-None-Match when the object did not exist). If another writer changed the
object in between, it reads it again and runs CMD again, backing off with
jitter, up to --attempts times. CMD must therefore be safe to run more than
once, and should derive its output from its input only.

Without KEY, the last path element of URL is the key:
'publish update s3://b/state.json -- ...' updates the key state.json of the
store s3://b. A key or URL path with a segment named like a dataset's own
objects (_pointer, _gen, _lease, _pin, _tag or _probe) is refused, wherever
the segment is: a dataset may live under any prefix. Before creating the
object, update checks that the store enforces conditional writes (see
'publish probe'). CMD sees COMMITPTR_EXISTS=1 when the object exists and 0
when it does not (its stdin is then empty, so a filter must handle empty
input: jq needs -n and 'input? // {}'). If CMD fails on its first run,
nothing is written. An empty output is refused (status 1, nothing written):
it is more often a broken filter than a wish to empty the object; pass
--allow-empty to write it. The object is at most 64 MiB.

An update with an ambiguous response is resolved by reading the object
back. If that is impossible, or if update has to stop (CMD fails on a
re-run, the attempts run out, an interrupt) while an earlier write of its
own is unsettled and may still land, the exit status is 5: look at the
object before running the update again.` + exitStatus(exitOK, exitError, exitUsage, exitLost, exitUnknown, exitInterrupted) + `
  (3 when every attempt lost to another writer; 1 when CMD failed, or wrote
  nothing without --allow-empty)`,
		Example: `  publish update s3://bucket/state.json -- jq -n 'input? // {} | .runs += 1'
  publish update file:///srv/shared counter -- sh -c 'read n; echo $((${n:-0} + 1))'`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			before, command, err := splitDash(cmd, args, 2)
			if err != nil {
				return err
			}
			switch len(before) {
			case 1:
				opts.URL, opts.Key, err = splitObjectURL(before[0])
				if err != nil {
					return err
				}
			case 2:
				opts.URL, opts.Key = before[0], before[1]
			default:
				return usagef("want URL [KEY] -- CMD, got %s before --", plural(len(before), "argument"))
			}
			opts.Command = command
			opts.stdin = cmd.InOrStdin()
			return runUpdate(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().IntVar(&opts.Attempts, "attempts", 50, "give up after this many lost races")
	cmd.Flags().BoolVar(&opts.AllowEmpty, "allow-empty", false, "write CMD's output even when it is empty (default: refuse, status 1)")
	return cmd
}

// reservedKeys are the names of a dataset's own objects and directories,
// the first segments of its keys below its prefix.
var reservedKeys = []string{
	pointer.Key,
	strings.TrimSuffix(generation.Dir, "/"),
	strings.TrimSuffix(lease.Dir, "/"),
	strings.TrimSuffix(commit.PinDir, "/"),
	strings.TrimSuffix(commit.TagDir, "/"),
	strings.TrimSuffix(store.ProbePrefix, "/"),
}

// reservedSegment returns the first segment of the slash-separated path p
// that is one of reservedKeys, or "". A dataset may live under any prefix,
// so a reserved name anywhere in a key can name a dataset's own object.
func reservedSegment(p string) string {
	for seg := range strings.SplitSeq(p, "/") {
		if slices.Contains(reservedKeys, seg) {
			return seg
		}
	}
	return ""
}

// splitObjectURL splits the URL of an object into the URL of its store and
// its key: s3://b/dir/state.json becomes s3://b/dir and state.json.
func splitObjectURL(raw string) (string, string, error) {
	if !strings.Contains(raw, "://") {
		return filepath.Dir(raw), filepath.Base(raw), nil
	}
	u, err := store.ParseURL(raw)
	if err != nil {
		return "", "", &usageError{err}
	}
	p := strings.TrimSuffix(u.Path, "/")
	i := strings.LastIndex(p, "/")
	if i < 0 || i == len(p)-1 {
		return "", "", usagef("URL %q names no object; give KEY or a URL ending in it", u.Redacted())
	}
	key := p[i+1:]
	u.Path = p[:i]
	if u.Path == "" && u.Scheme == "file" {
		u.Path = "/"
	}
	return u.String(), key, nil
}

// checkObjectKey refuses an empty key, and a key or URL that reaches a
// dataset's own objects: verb names the command in the message.
func checkObjectKey(rawURL, key, verb string) error {
	if key == "" {
		return usagef("empty KEY")
	}
	if r := reservedSegment(key); r != "" {
		return usagef("key %q has the segment %q of a dataset's own layout; %s refuses it", key, r, verb)
	}
	if u, err := store.ParseURL(rawURL); err == nil {
		if r := reservedSegment(u.Path); r != "" {
			return usagef("URL %s has the segment %q of a dataset's own layout; %s refuses it", u.Redacted(), r, verb)
		}
	}
	return nil
}

type updateResult struct {
	Key      string `json:"key"`
	ETag     string `json:"etag"`
	Size     int64  `json:"size"`
	Attempts int    `json:"attempts"`
}

func runUpdate(ctx context.Context, opts updateOptions, stdout, stderr io.Writer) error {
	if err := checkObjectKey(opts.URL, opts.Key, "update"); err != nil {
		return err
	}
	if opts.Attempts < 1 {
		return usagef("--attempts must be at least 1")
	}
	s, err := opts.openStore(ctx, opts.URL)
	if err != nil {
		return err
	}
	retry := object.Retry{Attempts: opts.Attempts, Base: 10 * time.Millisecond, Max: time.Second}
	runs, probed, filterFailed := 0, false, false
	attrs, err := object.Update(ctx, s, opts.Key, retry, func(old []byte, exists bool) ([]byte, error) {
		runs++
		if !exists && !probed {
			// The first write of this object: prove the store enforces
			// the conditions that make the update safe.
			if err := probeStore(ctx, s, opts.URL, stderr); err != nil {
				return nil, probeError(opts.URL, err)
			}
			probed = true
		}
		out, err := runFilter(ctx, opts.Command, old, exists, stderr)
		if err == nil && len(out) == 0 && !opts.AllowEmpty {
			// Most likely a broken filter, not a wish to empty the object.
			err = fmt.Errorf("%s wrote nothing, which would leave the object empty; pass --allow-empty if that is what you want", opts.Command[0])
		}
		filterFailed = err != nil
		return out, err
	})
	if err != nil {
		switch {
		case errors.Is(err, object.ErrUnknown):
			// A write of ours may still land: claim nothing.
		case filterFailed && ctx.Err() == nil:
			// Every write sent before was proven not to land.
			err = fmt.Errorf("%w; nothing was written", err)
		case errors.Is(err, store.ErrPrecondition) || errors.Is(err, store.ErrConflict):
			err = fmt.Errorf("%w: %w", commit.ErrConflict, err)
		}
		return fmt.Errorf("update %q in %s: %w", opts.Key, redact(opts.URL), err)
	}
	res := updateResult{Key: opts.Key, ETag: attrs.ETag, Size: attrs.Size, Attempts: runs}
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	fmt.Fprintf(opts.out(stdout), "updated %s (%s, etag %s, %s)\n", res.Key, plural(res.Size, "byte"), res.ETag, plural(res.Attempts, "attempt"))
	return nil
}

// runFilter runs the command with old on stdin and returns its stdout.
func runFilter(ctx context.Context, command []string, old []byte, exists bool, stderr io.Writer) ([]byte, error) {
	c := exec.CommandContext(ctx, command[0], command[1:]...)
	c.Stdin = bytes.NewReader(old)
	var out limitedBuffer
	out.limit = object.MaxSize
	c.Stdout = &out
	c.Stderr = stderr
	c.Env = append(os.Environ(), "COMMITPTR_EXISTS="+map[bool]string{true: "1", false: "0"}[exists])
	if err := c.Run(); err != nil {
		if out.over {
			return nil, fmt.Errorf("%s wrote more than %d bytes", command[0], object.MaxSize)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%s: %w", command[0], err)
	}
	return out.buf.Bytes(), nil
}

// limitedBuffer collects up to limit bytes and fails beyond.
type limitedBuffer struct {
	buf   bytes.Buffer
	limit int
	over  bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if b.buf.Len()+len(p) > b.limit {
		b.over = true
		return 0, errors.New("output too large")
	}
	return b.buf.Write(p)
}
