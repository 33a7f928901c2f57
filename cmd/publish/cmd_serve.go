package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/serve"
	"github.com/commitptr/commitptr/store"
)

type serveOptions struct {
	*globalOptions
	URLs                 []string
	Listen               string
	Refresh              time.Duration
	AccessKey, SecretKey string
}

func newServeCommand(g *globalOptions) *cobra.Command {
	opts := serveOptions{globalOptions: g}
	cmd := &cobra.Command{
		Use:   "serve [NAME=]URL...",
		Short: "Serve the snapshots of datasets as a read-only S3 endpoint",
		Long: `Serve answers S3 requests for the snapshots of the datasets at URL..., so that
any S3 client (the aws CLI, rclone, boto3, DuckDB, Spark) reads them.

Each dataset is a bucket, named after the last element of its URL or NAME.
Its keys are REF/PATH, where REF is one of
  current      the current snapshot (of a read of the pointer at most --refresh old)
  @SEQ         the retained snapshot of seq SEQ
  tag:NAME     the snapshot the tag NAME names
  gen:ID       the retained snapshot of generation ID
and PATH a file of that snapshot. GetObject (with ranges and conditional
headers; the ETag is the file's sha256), HeadObject, ListObjects,
ListBuckets and GetBucketLocation are answered; requests that would write
are refused with AccessDenied, other operations with NotImplemented.

Every file is verified against its manifest while it streams: a file whose
stored bytes do not match ends its response early, so the client fails
rather than read wrong bytes. A paged listing stays on the generation its
first page came from. Listing the bucket's root with the delimiter '/'
gives current/ and @SEQ/ of the current snapshot: read under @SEQ/ to see
one snapshot across many requests. The generations being read are pinned
(renewed while in use), so that gc keeps them.

Serve binds 127.0.0.1:9000 by default and then accepts unsigned requests.
To bind any other address, give access keys (--access-key and
--secret-key, or PUBLISH_SERVE_ACCESS_KEY and PUBLISH_SERVE_SECRET_KEY):
every request must then be signed with them (AWS Signature V4).

It prints the endpoint's URL, and runs until interrupted (SIGINT or
SIGTERM), which ends it with status 0.` + exitStatus(exitOK, exitError, exitUsage),
		Example: `  publish serve s3://bucket/daily
  publish serve --listen 127.0.0.1:9100 sales=s3://bucket/sales file:///srv/datasets/app
  publish serve daily=prod:daily                # a remote of the config file
  aws --endpoint-url http://127.0.0.1:9000 s3 ls s3://daily/current/`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.URLs = args
			return runServe(cmd.Context(), opts, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&opts.Listen, "listen", "127.0.0.1:9000", "the `ADDRESS:PORT` to listen on; other than a loopback address needs access keys")
	cmd.Flags().DurationVar(&opts.Refresh, "refresh", time.Second, "how long a read of the pointer (or a tag) is trusted; while requests come, the pointer is read again shortly before, in the background")
	cmd.Flags().StringVar(&opts.AccessKey, "access-key", "", "the access key id clients sign with (default $PUBLISH_SERVE_ACCESS_KEY)")
	cmd.Flags().StringVar(&opts.SecretKey, "secret-key", "", "the secret key clients sign with (default $PUBLISH_SERVE_SECRET_KEY)")
	return cmd
}

// serveBucket returns the bucket name and URL of an argument [NAME=]URL.
func serveBucket(arg string) (name, rawURL string, err error) {
	if n, u, ok := strings.Cut(arg, "="); ok && !strings.Contains(n, ":") && !strings.Contains(n, "/") {
		name, rawURL = n, u
	} else {
		rawURL = arg
		u, err := store.ParseURL(arg)
		if err != nil {
			return "", "", usagef("%s: %v", redact(arg), err)
		}
		name = path.Base(strings.TrimRight(u.Path, "/"))
		if name == "." || name == "/" || name == "" {
			name = u.Host
		}
	}
	if err := serve.ValidBucketName(name); err != nil {
		return "", "", usagef("%s: %v; name the bucket with NAME=URL", redact(rawURL), err)
	}
	return name, rawURL, nil
}

// isLoopback reports whether the listen address binds loopback only.
func isLoopback(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func runServe(ctx context.Context, opts serveOptions, stdout io.Writer) error {
	if opts.AccessKey == "" {
		opts.AccessKey = os.Getenv("PUBLISH_SERVE_ACCESS_KEY")
	}
	if opts.SecretKey == "" {
		opts.SecretKey = os.Getenv("PUBLISH_SERVE_SECRET_KEY")
	}
	if (opts.AccessKey == "") != (opts.SecretKey == "") {
		return usagef("give both --access-key and --secret-key, or neither")
	}
	if opts.AccessKey == "" && !isLoopback(opts.Listen) {
		return usagef("--listen %s is not a loopback address: give access keys (--access-key and --secret-key) so that requests are signed", opts.Listen)
	}
	if opts.Refresh <= 0 {
		return usagef("--refresh must be positive")
	}
	datasets := map[string]*commit.Dataset{}
	for _, arg := range opts.URLs {
		name, rawURL, err := serveBucket(arg)
		if err != nil {
			return err
		}
		if _, dup := datasets[name]; dup {
			return usagef("two datasets are named %q; name them with NAME=URL", name)
		}
		d, err := opts.openDataset(ctx, rawURL)
		if err != nil {
			return err
		}
		datasets[name] = d
	}
	so := serve.Options{Refresh: opts.Refresh, Logger: opts.log(), Owner: "publish serve " + opts.Listen}
	if opts.AccessKey != "" {
		so.AccessKeys = map[string]string{opts.AccessKey: opts.SecretKey}
	}
	srv, err := serve.New(datasets, so)
	if err != nil {
		return err
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := srv.Close(ctx); err != nil {
			opts.log().Warn("serve: releasing pins", "err", err)
		}
	}()
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("--listen %s: %w", opts.Listen, err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: time.Minute}
	fmt.Fprintf(opts.out(stdout), "serving %d dataset(s) at http://%s\n", len(datasets), ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}
