// Command publish publishes directories to object stores atomically, reads
// them back as consistent snapshots, and runs commands under leases.
//
// Every command is in a file of its own (cmd_<name>.go) with an options
// struct and a runX(ctx, opts, stdout, stderr) function that does the work,
// so tests can call commands directly and capture their output. main only
// builds a signal-aware context, runs the command tree and maps the error to
// an exit status (see exitCode).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/gc"
	"github.com/commitptr/commitptr/job"
	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/mount"
	"github.com/commitptr/commitptr/object"
)

// Exit statuses. They are documented in every command's help and in
// docs/cli.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitLost        = 3
	exitHeld        = 4
	exitUnknown     = 5
	exitFenced      = 6
	exitNoFUSE      = 7
	exitDiffers     = 8
	exitInterrupted = 130
)

func main() {
	ctx, stop := watchInterrupts(context.Background())
	code := Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// Main runs the command line args and returns the exit status. Errors are
// printed to stderr.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCommand(stdin, stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	code := exitCode(ctx, err)
	verbose, _ := root.PersistentFlags().GetCount("verbose")
	msg := tidyMessage(err.Error(), verbose)
	if code == exitInterrupted {
		// Say what happened in the user's words: the signal, not the
		// context it cancelled.
		msg = strings.ReplaceAll(msg, context.Canceled.Error(), "interrupted")
	}
	var ee *statusError
	switch {
	case errors.As(err, &ee) && ee.err == nil:
		// The status of a child command: it has spoken for itself.
	case code == exitUsage:
		fmt.Fprintf(stderr, "publish: %s\nRun '%s --help' for usage.\n", msg, cmd.CommandPath())
	default:
		fmt.Fprintf(stderr, "publish: %s\n", msg)
	}
	return code
}

// internalPrefix matches the package prefixes that errors of the library
// carry, where a message begins or after a colon.
var internalPrefix = regexp.MustCompile(`(^|: )(commit|object|store|pointer|generation|lease|gc|job|serve|mount|fs|s3|minio|gcs|azblob|mem): `)

// requestIDs matches the S3 request and host ids that the AWS SDK puts in
// its error messages.
var requestIDs = regexp.MustCompile(`,? ?\b(RequestID|HostID): [^,]*`)

// tidyMessage makes an error message for people: below -vv it drops the
// library's package prefixes ("commit: ", "store: "), which name code, not
// what went wrong, the S3 request ids, which only a support case needs,
// and the SDK's "https" of a response that may have come over http. At
// -vv the message is left whole.
func tidyMessage(msg string, verbose int) string {
	if verbose >= 2 {
		return msg
	}
	msg = internalPrefix.ReplaceAllString(msg, "$1")
	// The SDK says "https" of every response, http:// endpoints' too.
	msg = strings.ReplaceAll(msg, "https response error", "response error")
	return requestIDs.ReplaceAllString(msg, "")
}

// exitCode maps an error to the documented exit status. The more specific
// outcome wins: an unknown commit or update outcome (5) over everything, since it
// tells the caller to look before retrying; then lost races (3) and
// fencing (6); then interruption (130), which also ends a wait for a held
// lease (4).
func exitCode(ctx context.Context, err error) int {
	var ee *statusError
	var ue *usageError
	var re *runError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, commit.ErrCommitUnknown), errors.Is(err, object.ErrUnknown):
		return exitUnknown
	case errors.Is(err, commit.ErrConflict), errors.Is(err, job.ErrTaskLost):
		return exitLost
	case errors.Is(err, commit.ErrFenced), errors.Is(err, commit.ErrStale), errors.Is(err, lease.ErrLost):
		return exitFenced
	case ctx.Err() != nil && errors.Is(err, context.Canceled):
		return exitInterrupted
	case errors.Is(err, mount.ErrNoFUSE):
		return exitNoFUSE
	case errors.Is(err, lease.ErrHeld), errors.Is(err, gc.ErrBusy):
		return exitHeld
	case errors.As(err, &ue):
		return exitUsage
	case errors.As(err, &re):
		return exitError
	default:
		// Not raised by a command's own code: cobra refused the command
		// line (unknown command or flag, wrong number of arguments).
		return exitUsage
	}
}

// usageError marks a bad command line found by a command itself.
type usageError struct{ err error }

func (e *usageError) Error() string { return e.err.Error() }
func (e *usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Errorf(format, args...)}
}

// runError marks an error returned by a command's RunE, as opposed to one
// cobra raised while parsing the command line.
type runError struct{ err error }

func (e *runError) Error() string { return e.err.Error() }
func (e *runError) Unwrap() error { return e.err }

// statusError carries an exit status chosen by the command, such as the
// status of the child process of run. With a nil err nothing is printed.
type statusError struct {
	code int
	err  error
}

func (e *statusError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *statusError) Unwrap() error { return e.err }
