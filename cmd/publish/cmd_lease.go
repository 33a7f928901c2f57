package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/lease"
	"github.com/commitptr/commitptr/store"
)

type leaseOptions struct {
	*globalOptions
	URL, Name string
	TTL       time.Duration
	Wait      time.Duration
	Owner     string
	Token     uint64
}

func newLeaseCommand(g *globalOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lease",
		Short: "Acquire, release or inspect a lease by hand",
		Long: `A lease is one small object, _lease/NAME in the dataset, holding its owner,
a fencing token and a TTL. It is taken with a conditional write and expires
when, by the store's clock, TTL + 1 s passed since its last write. Each new
holder gets a larger token. 'publish run' holds a lease around a command;
these subcommands manage one by hand.` + exitStatus(exitOK, exitError, exitUsage, exitHeld, exitInterrupted),
	}
	cmd.AddCommand(newLeaseAcquireCommand(g), newLeaseReleaseCommand(g), newLeaseStatusCommand(g))
	return cmd
}

func newLeaseAcquireCommand(g *globalOptions) *cobra.Command {
	opts := leaseOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "acquire URL NAME",
		Short: "Take a lease and print its fencing token",
		Long: `Acquire takes the lease NAME of the dataset at URL and prints its fencing
token. It fails at once with status 4 if someone holds it, or waits up to
--wait for it.

Nothing renews the lease afterwards: it is yours until --ttl passes (by the
store's clock) or you release it with 'publish lease release URL NAME
--token TOKEN'. To hold a lease while a command runs, use 'publish run'.

Before the first use of a lease name, acquire checks that the store enforces
conditional writes (see 'publish probe').` + exitStatus(exitOK, exitError, exitUsage, exitHeld, exitInterrupted),
		Example: `  publish lease acquire --ttl 2h s3://bucket/daily maintenance
  token=$(publish lease acquire --json s3://bucket/daily maintenance | jq .token)`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL, opts.Name = args[0], args[1]
			return runLeaseAcquire(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().DurationVar(&opts.TTL, "ttl", time.Hour, "how long the lease lives without being renewed or released")
	cmd.Flags().DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a held lease (0: fail at once with status 4)")
	cmd.Flags().StringVar(&opts.Owner, "owner", "", "owner name written into the lease (default host:pid)")
	return cmd
}

func newLeaseReleaseCommand(g *globalOptions) *cobra.Command {
	opts := leaseOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "release URL NAME --token TOKEN",
		Short: "Release a lease taken by hand",
		Long: `Release gives up the lease NAME if it is still held with TOKEN: a
conditional write that marks it released (never a delete, so tokens stay
monotonic), after which anyone can take it at once. If the lease was taken
over or released already, there is nothing to do and the status is 0.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish lease release s3://bucket/daily maintenance --token 7`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL, opts.Name = args[0], args[1]
			return runLeaseRelease(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	cmd.Flags().Uint64Var(&opts.Token, "token", 0, "the token 'lease acquire' printed (required)")
	cmd.MarkFlagRequired("token") //nolint:errcheck // the flag exists
	return cmd
}

func newLeaseStatusCommand(g *globalOptions) *cobra.Command {
	opts := leaseOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "status URL NAME",
		Short: "Show who holds a lease, with which token, until when",
		Long: `Status reads the lease NAME (one GET) and prints its owner, token, state
(held, expired or released), and until when it holds unless renewed. Times
are the store's clock.` + exitStatus(exitOK, exitError, exitUsage, exitInterrupted),
		Example: `  publish lease status s3://bucket/daily gc`,
		Args:    cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URL, opts.Name = args[0], args[1]
			return runLeaseStatus(cmd.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	return cmd
}

// acquireLease takes a lease, waiting up to wait for it.
func acquireLease(ctx context.Context, s store.Store, name string, ttl, wait time.Duration, owner string) (*lease.Lease, error) {
	if err := lease.CheckName(name); err != nil {
		return nil, &usageError{err}
	}
	lo := lease.Options{TTL: ttl, Owner: owner}
	if wait <= 0 {
		return lease.TryAcquire(ctx, s, name, lo)
	}
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	l, err := lease.Acquire(wctx, s, name, lo)
	if err != nil && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
		var he *lease.HeldError
		if errors.As(err, &he) {
			return nil, fmt.Errorf("gave up waiting after %s: %w", wait, he)
		}
	}
	return l, err
}

// probeNewLease checks, before the first acquisition of a lease name, that
// the store enforces conditional writes (one GET; the probe's five requests
// only for a new name).
func probeNewLease(ctx context.Context, s store.Store, rawURL, name string, stderr io.Writer) error {
	if err := lease.CheckName(name); err != nil {
		return &usageError{err}
	}
	_, err := lease.Status(ctx, s, name)
	switch {
	case errors.Is(err, store.ErrNotExist):
		if err := probeStore(ctx, s, rawURL, stderr); err != nil {
			return probeError(rawURL, err)
		}
	case err != nil && !errors.Is(err, lease.ErrCorrupt):
		return err
	}
	return nil
}

// releaseLease releases a lease at exit and logs a failure: the lease
// then expires after its TTL.
func releaseLease(l *lease.Lease, g *globalOptions) {
	if err := l.Release(context.Background()); err != nil {
		g.log().Warn("could not release the lease; it expires after its TTL", "name", l.Name(), "error", err)
	}
}

type leaseResult struct {
	Name  string `json:"name"`
	Owner string `json:"owner"`
	Token uint64 `json:"token"`
	TTL   string `json:"ttl"`
	// Until is the server time at which the lease expires unless renewed.
	Until time.Time `json:"until"`
}

func runLeaseAcquire(ctx context.Context, opts leaseOptions, stdout, stderr io.Writer) error {
	if opts.TTL <= 0 {
		return usagef("--ttl must be positive")
	}
	s, err := opts.openStore(ctx, opts.URL)
	if err != nil {
		return err
	}
	if err := probeNewLease(ctx, s, opts.URL, opts.Name, stderr); err != nil {
		return err
	}
	l, err := acquireLease(ctx, s, opts.Name, opts.TTL, opts.Wait, opts.Owner)
	if err != nil {
		return err
	}
	res := leaseResult{Name: l.Name(), Owner: l.Owner(), Token: l.Token(), TTL: l.TTL().String(), Until: l.ServerTime().Add(l.TTL())}
	if opts.JSON {
		return writeJSON(stdout, res)
	}
	fmt.Fprintf(opts.out(stdout), "acquired lease %s: token %d, owner %s, until about %s (server time)\n", res.Name, res.Token, res.Owner, formatTime(res.Until))
	return nil
}

// leaseRecord mirrors the body of a lease object (see package lease). The
// lease package releases only leases that its process holds; releasing a
// lease acquired by an earlier process needs this by-hand write.
type leaseRecord struct {
	Owner    string `json:"owner"`
	Token    uint64 `json:"token"`
	TTLms    int64  `json:"ttl_ms"`
	Released bool   `json:"released"`
	WriteID  string `json:"write_id"`
}

func runLeaseRelease(ctx context.Context, opts leaseOptions, stdout, _ io.Writer) error {
	if err := lease.CheckName(opts.Name); err != nil {
		return &usageError{err}
	}
	s, err := opts.openStore(ctx, opts.URL)
	if err != nil {
		return err
	}
	key := lease.Key(opts.Name)
	say := func(format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		if opts.JSON {
			return writeJSON(stdout, map[string]any{"name": opts.Name, "token": opts.Token, "result": msg})
		}
		_, err := fmt.Fprintf(opts.out(stdout), "lease %s: %s\n", opts.Name, msg)
		return err
	}
	for attempt := 0; attempt < 3; attempt++ {
		rec, etag, err := readLeaseRecord(ctx, s, key)
		if errors.Is(err, store.ErrNotExist) {
			return fmt.Errorf("lease %q: %w: it was never acquired", opts.Name, err)
		}
		if err != nil {
			return err
		}
		switch {
		case rec.Token != opts.Token:
			return say("now held with token %d by %s, not %d; nothing to release", rec.Token, rec.Owner, opts.Token)
		case rec.Released:
			return say("token %d was released already", rec.Token)
		}
		rec.Released, rec.WriteID = true, rand.Text()
		body, _ := json.Marshal(rec)
		_, err = s.Put(ctx, key, bytes.NewReader(body), store.PutOptions{IfMatch: etag, Size: int64(len(body)), ContentType: "application/json"})
		if err == nil {
			return say("released token %d", rec.Token)
		}
		back, _, rerr := readLeaseRecord(ctx, s, key)
		if rerr == nil && back.WriteID == rec.WriteID {
			return say("released token %d", rec.Token)
		}
		if !errors.Is(err, store.ErrPrecondition) && !errors.Is(err, store.ErrConflict) {
			return fmt.Errorf("lease %q: release: %w", opts.Name, err)
		}
		// Renewed or taken over in between: look again.
	}
	return fmt.Errorf("lease %q: release: the lease kept changing", opts.Name)
}

func readLeaseRecord(ctx context.Context, s store.Store, key string) (leaseRecord, string, error) {
	rc, attrs, err := s.Get(ctx, key)
	if err != nil {
		return leaseRecord{}, "", err
	}
	defer rc.Close()
	var rec leaseRecord
	dec := json.NewDecoder(io.LimitReader(rc, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rec); err != nil || rec.Token == 0 || rec.WriteID == "" {
		return leaseRecord{}, "", fmt.Errorf("%w: %q: %v", lease.ErrCorrupt, key, err)
	}
	return rec, attrs.ETag, nil
}

type leaseStatus struct {
	Name         string    `json:"name"`
	State        string    `json:"state"` // free, held, expired, released
	Owner        string    `json:"owner,omitempty"`
	Token        uint64    `json:"token,omitempty"`
	TTL          string    `json:"ttl,omitempty"`
	LastModified time.Time `json:"last_modified,omitzero"`
	ServerTime   time.Time `json:"server_time,omitzero"`
	Until        time.Time `json:"until,omitzero"`
}

func runLeaseStatus(ctx context.Context, opts leaseOptions, stdout, _ io.Writer) error {
	if err := lease.CheckName(opts.Name); err != nil {
		return &usageError{err}
	}
	s, err := opts.openStore(ctx, opts.URL)
	if err != nil {
		return err
	}
	st := leaseStatus{Name: opts.Name, State: "free"}
	info, err := lease.Status(ctx, s, opts.Name)
	switch {
	case errors.Is(err, store.ErrNotExist):
	case err != nil:
		return err
	default:
		st.Owner, st.Token, st.TTL = info.Owner, info.Token, info.TTL.String()
		st.LastModified, st.ServerTime, st.Until = info.LastModified, info.ServerTime, info.Until
		switch {
		case info.Released:
			st.State = "released"
		case info.Expired:
			st.State = "expired"
		default:
			st.State = "held"
		}
	}
	if opts.JSON {
		return writeJSON(stdout, st)
	}
	if st.State == "free" {
		fmt.Fprintf(stdout, "lease %s: free (never acquired)\n", st.Name)
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "lease\t%s\n", st.Name)
	fmt.Fprintf(tw, "state\t%s\n", st.State)
	fmt.Fprintf(tw, "owner\t%s\n", st.Owner)
	fmt.Fprintf(tw, "token\t%d\n", st.Token)
	fmt.Fprintf(tw, "ttl\t%s\n", st.TTL)
	fmt.Fprintf(tw, "written\t%s\n", formatTime(st.LastModified))
	if st.State == "held" {
		fmt.Fprintf(tw, "until\t%s (%s left)\n", formatTime(st.Until), st.Until.Sub(st.ServerTime).Round(time.Second))
	}
	return tw.Flush()
}
