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
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/store"
)

type updateOptions struct {
	*globalOptions
	URL, Key string
	Command  []string
	Attempts int
	stdin    io.Reader
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
store s3://b. The dataset's own keys (_pointer, _gen/, _lease/, _pin/, _tag/,
_probe/) are refused. Before creating the object, update checks that the
store enforces conditional writes (see 'publish probe'). CMD sees COMMITPTR_EXISTS=1 when the object exists and
0 when it does not (its stdin is then empty). If CMD fails, nothing is
written. The object is at most 64 MiB.

An update with an ambiguous response is resolved by reading the object
back; if that is impossible too, the exit status is 5.` + exitStatus(exitOK, exitError, exitUsage, exitLost, exitUnknown, exitInterrupted) + `
  (3 when every attempt lost to another writer; 1 when CMD failed)`,
		Example: `  publish update s3://bucket/state.json -- jq '.runs += 1'
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
				return usagef("want URL [KEY] -- CMD, got %d arguments before --", len(before))
			}
			opts.Command = command
			opts.stdin = cmd.InOrStdin()
			return runUpdate(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().IntVar(&opts.Attempts, "attempts", 50, "give up after this many lost races")
	return cmd
}

// reservedKeys are the first key segments of a dataset's own objects.
var reservedKeys = []string{"_pointer", "_gen", "_lease", "_pin", "_tag", "_probe"}

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

type updateResult struct {
	Key      string `json:"key"`
	ETag     string `json:"etag"`
	Size     int64  `json:"size"`
	Attempts int    `json:"attempts"`
}

func runUpdate(ctx context.Context, opts updateOptions, stdout, stderr io.Writer) error {
	if opts.Key == "" {
		return usagef("empty KEY")
	}
	first, _, _ := strings.Cut(opts.Key, "/")
	for _, r := range reservedKeys {
		if first == r {
			return usagef("key %q belongs to the dataset's own layout; update refuses it", opts.Key)
		}
	}
	if opts.Attempts < 1 {
		return usagef("--attempts must be at least 1")
	}
	s, err := opts.openStore(ctx, opts.URL)
	if err != nil {
		return err
	}
	retry := commit.Retry{Attempts: opts.Attempts, Base: 10 * time.Millisecond, Max: time.Second}
	runs, probed := 0, false
	attrs, err := commit.UpdateObject(ctx, s, opts.Key, retry, func(old []byte, exists bool) ([]byte, error) {
		runs++
		if !exists && !probed {
			// The first write of this object: prove the store enforces
			// the conditions that make the update safe.
			if err := probeStore(ctx, s); err != nil {
				return nil, probeError(opts.URL, err)
			}
			probed = true
		}
		return runFilter(ctx, opts.Command, old, exists, stderr)
	})
	if err != nil {
		if errors.Is(err, store.ErrPrecondition) || errors.Is(err, store.ErrConflict) {
			err = fmt.Errorf("%w: %w", commit.ErrConflict, err)
		}
		return fmt.Errorf("update %q in %s: %w", opts.Key, redact(opts.URL), err)
	}
	res := updateResult{Key: opts.Key, ETag: attrs.ETag, Size: attrs.Size, Attempts: runs}
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	fmt.Fprintf(stdout, "updated %s (%d bytes, etag %s, %d attempts)\n", res.Key, res.Size, res.ETag, res.Attempts)
	return nil
}

// runFilter runs the command with old on stdin and returns its stdout.
func runFilter(ctx context.Context, command []string, old []byte, exists bool, stderr io.Writer) ([]byte, error) {
	c := exec.CommandContext(ctx, command[0], command[1:]...)
	c.Stdin = bytes.NewReader(old)
	var out limitedBuffer
	out.limit = commit.MaxObjectSize
	c.Stdout = &out
	c.Stderr = stderr
	c.Env = append(os.Environ(), "COMMITPTR_EXISTS="+map[bool]string{true: "1", false: "0"}[exists])
	if err := c.Run(); err != nil {
		if out.over {
			return nil, fmt.Errorf("%s wrote more than %d bytes; nothing was written", command[0], commit.MaxObjectSize)
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%s: %w; nothing was written", command[0], err)
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
