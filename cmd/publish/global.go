package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"golang.org/x/term"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
	_ "github.com/commitptr/commitptr/store/azblob" // registers az://
	_ "github.com/commitptr/commitptr/store/fs"     // registers file://
	_ "github.com/commitptr/commitptr/store/gcs"    // registers gs://
	_ "github.com/commitptr/commitptr/store/mem"    // registers mem://
	_ "github.com/commitptr/commitptr/store/minio"  // registers minio://
	_ "github.com/commitptr/commitptr/store/s3"     // registers s3://
)

// globalOptions are the flags every command takes.
type globalOptions struct {
	Endpoint  string
	Region    string
	Profile   string
	PathStyle bool
	Timeouts  store.Timeouts
	JSON      bool
	Verbose   int
	Quiet     bool
	Progress  bool
	Config    string
	NoCache   bool
	Transfers int

	// Encryption and storage class of the objects written (S3).
	SSE          string
	SSEKMSKeyID  string
	SSECKey      string // where the customer key is: a file, or env:NAME
	StorageClass string

	// mu serializes the -v lines of parallel transfers.
	mu sync.Mutex

	// logger is built from Verbose before a command runs.
	logger *slog.Logger
	// flags are the global flags, to tell given ones from defaults.
	flags *pflag.FlagSet
}

// AddFlags registers the global flags.
func (g *globalOptions) AddFlags(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
	g.flags = f
	f.StringVar(&g.Endpoint, "endpoint", "", "the service URL: an S3-compatible server for s3:// and minio:// (default: $AWS_ENDPOINT_URL_S3, $AWS_ENDPOINT_URL, or AWS), an emulator for gs:// (default: $STORAGE_EMULATOR_HOST, or Google), the blob service for az://")
	f.StringVar(&g.Region, "region", "", "S3 region (default: $AWS_REGION or the profile's region)")
	f.StringVar(&g.Profile, "profile", "", "AWS shared-config profile (default: $AWS_PROFILE)")
	f.BoolVar(&g.PathStyle, "path-style", false, "address buckets as ENDPOINT/BUCKET, as most S3-compatible servers need")
	f.DurationVar(&g.Timeouts.Connect, "connect-timeout", store.DefaultConnectTimeout, "remote stores: give up on a connection (TCP and TLS) not made within this time (URL: ?connect_timeout=)")
	f.DurationVar(&g.Timeouts.Header, "timeout", store.DefaultHeaderTimeout, "remote stores: give up on a request the service has not started answering within this time (URL: ?timeout=); file://: give up waiting for the lock of a directory that another process holds")
	f.DurationVar(&g.Timeouts.Idle, "idle-timeout", store.DefaultIdleTimeout, "remote stores: give up on a transfer that moves no byte for this long; one that moves bytes is never cut (URL: ?idle_timeout=)")
	f.BoolVar(&g.JSON, "json", false, "write machine-readable JSON to stdout instead of tables")
	f.CountVarP(&g.Verbose, "verbose", "v", "say more on stderr: -v lists each file with its action (uploaded, reused, downloaded, deleted) and logs steps; -vv also logs each request's details and S3 request ids")
	f.BoolVarP(&g.Quiet, "quiet", "q", false, "print only errors (and what --json or a reading command such as cat or ls is asked for)")
	f.StringVar(&g.Config, "config", "", "the config file whose remotes an argument NAME:PATH names (default: publish/config under $XDG_CONFIG_HOME or ~/.config)")
	f.StringVar(&g.SSE, "sse", "", "encrypt every object written with keys the service manages: AES256 or aws:kms (S3; gs:// takes aws:kms with a Cloud KMS key; URL: ?sse=)")
	f.StringVar(&g.SSEKMSKeyID, "sse-kms-key-id", "", "the key of --sse aws:kms: a KMS key id, or on gs:// a Cloud KMS key name (default on S3: the account's; URL: ?sse_kms_key_id=)")
	f.StringVar(&g.SSECKey, "sse-c-key", "", "encrypt every object written with this key of yours (S3 SSE-C; also gs:// and az://), and send it with every read: a file holding 32 bytes or their base64, or env:NAME for an environment variable that holds them")
	f.StringVar(&g.StorageClass, "storage-class", "", "the storage class of every object written, such as STANDARD_IA or NEARLINE, or the access tier on az:// (default: the bucket's; URL: ?storage_class=)")
	f.BoolVar(&g.NoCache, "no-cache", false, "neither keep nor use copies of manifests in the user's cache directory (publish/manifests), where put, get and sync find the manifest of a generation they saw before without reading it again (none are kept with --sse-c-key)")
	f.IntVar(&g.Transfers, "transfers", 0, "remote stores: how many requests to keep in flight: 0 adapts the number to the service's answers (16 at first, up to 256, fewer when it answers 503 or 429 or times out), N pins it at N; put, get, sync and verify then also handle N files at once unless --concurrency says otherwise")
	f.BoolVar(&g.Progress, "progress", false, "show the progress display on stderr even when it is not a terminal (it is shown on a terminal anyway, never with -q or --json)")
}

// envPrefix begins the environment variable of each global flag.
const envPrefix = "PUBLISH_"

// envName is the environment variable of a global flag: PUBLISH_ and the
// flag's name in upper case, dashes as underscores (rclone's convention).
func envName(flag string) string {
	return envPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// fromEnv sets each global flag not given on the command line from its
// environment variable, if set and not empty; the command line wins. A
// value the flag does not take is a usage error naming the variable. A
// flag set this way counts as given (see explicitTimeouts).
func (g *globalOptions) fromEnv() error {
	if g.flags == nil {
		return nil
	}
	var errs []error
	g.flags.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		v := os.Getenv(envName(f.Name))
		if v == "" {
			return
		}
		if err := g.flags.Set(f.Name, v); err != nil {
			errs = append(errs, usagef("%s=%q: %v", envName(f.Name), v, err))
		}
	})
	return errors.Join(errs...)
}

// out is where a transfer command writes its lines for people: stdout, or
// nothing with -q (--json output is written to stdout regardless).
func (g *globalOptions) out(stdout io.Writer) io.Writer {
	if g.Quiet {
		return io.Discard
	}
	return stdout
}

// fileAction lists one file and what was done with it, at -v.
func (g *globalOptions) fileAction(stderr io.Writer, action, path string) {
	if g.Verbose >= 1 && !g.Quiet {
		g.mu.Lock()
		defer g.mu.Unlock()
		fmt.Fprintf(stderr, "%s %s\n", action, path)
	}
}

// log returns the logger: warnings only, info with -v, debug with -vv.
func (g *globalOptions) log() *slog.Logger {
	if g.logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return g.logger
}

func (g *globalOptions) initLogger(stderr io.Writer) {
	level := slog.LevelWarn
	switch {
	case g.Verbose >= 2:
		level = slog.LevelDebug
	case g.Verbose == 1:
		level = slog.LevelInfo
	}
	g.logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}

// openStore opens the store a URL names. A URL that cannot be parsed or
// names an unknown scheme is a usage error. Credentials come from the AWS
// chain only and never appear in messages: the drivers refuse URLs with
// user information.
func (g *globalOptions) openStore(ctx context.Context, rawURL string) (store.Store, error) {
	u, err := store.ParseURL(rawURL)
	if err != nil {
		return nil, &usageError{err}
	}
	if !slices.Contains(store.Schemes(), u.Scheme) {
		return nil, usagef("unknown URL scheme %q in %q (known: %s)", u.Scheme, u.Redacted(), strings.Join(store.Schemes(), ", "))
	}
	timeouts, err := g.explicitTimeouts()
	if err != nil {
		return nil, err
	}
	key, err := g.customerKey()
	if err != nil {
		return nil, err
	}
	if g.Transfers < 0 {
		return nil, usagef("--transfers must be 0 (adaptive) or more")
	}
	rawURL, pathStyle := g.pathStyle(u, rawURL)
	s, err := store.Open(ctx, rawURL, store.Config{
		Endpoint: g.Endpoint, Region: g.Region, Profile: g.Profile, PathStyle: pathStyle,
		Timeouts:     timeouts,
		Encryption:   store.Encryption{SSE: g.SSE, KMSKeyID: g.SSEKMSKeyID, CustomerKey: key},
		StorageClass: g.StorageClass,
		Transfers:    g.Transfers,
	})
	if err != nil {
		if errors.Is(err, store.ErrNoBucket) || errors.Is(err, store.ErrAccess) {
			return nil, fmt.Errorf("open %s: %w", u.Redacted(), err)
		}
		return nil, &usageError{fmt.Errorf("open %s: %w", u.Redacted(), err)}
	}
	g.log().Debug("opened store", "url", u.Redacted())
	if g.Verbose >= 2 {
		s = store.WithLog(s, g.log())
	}
	return s, nil
}

// customerKey reads the key --sse-c-key names: a file, or env:NAME. It
// is nil without the flag.
func (g *globalOptions) customerKey() ([]byte, error) {
	if g.SSECKey == "" {
		return nil, nil
	}
	var b []byte
	if name, ok := strings.CutPrefix(g.SSECKey, "env:"); ok {
		v, set := os.LookupEnv(name)
		if !set {
			return nil, usagef("--sse-c-key: environment variable %s is not set", name)
		}
		b = []byte(v)
	} else {
		var err error
		if b, err = os.ReadFile(g.SSECKey); err != nil {
			if _, isKey := store.ParseCustomerKey([]byte(g.SSECKey)); isKey == nil {
				// The key itself, as the AWS CLI takes it: the error
				// would name it.
				return nil, usagef("--sse-c-key takes a file that holds the key, or env:NAME, not the key itself")
			}
			return nil, usagef("--sse-c-key: %v", err)
		}
	}
	key, err := store.ParseCustomerKey(b)
	if err != nil {
		return nil, usagef("--sse-c-key %s: %v", g.SSECKey, err)
	}
	return key, nil
}

// pathStyle applies --path-style to the URL u of rawURL. A Config's
// PathStyle can only turn path style on, so a flag given on the command
// line, false included, goes into an S3 URL's path_style parameter, where
// it overrides the URL's own or its remote's.
func (g *globalOptions) pathStyle(u *url.URL, rawURL string) (string, bool) {
	if g.flags == nil || !g.flags.Changed("path-style") || (u.Scheme != "s3" && u.Scheme != "minio") {
		return rawURL, g.PathStyle
	}
	q := u.Query()
	q.Set("path_style", strconv.FormatBool(g.PathStyle))
	v := *u
	v.RawQuery = q.Encode()
	return v.String(), false
}

// explicitTimeouts returns the timeouts given on the command line; the
// others stay zero, so that the URL's parameters or the defaults apply.
func (g *globalOptions) explicitTimeouts() (store.Timeouts, error) {
	if g.flags == nil {
		return g.Timeouts, nil
	}
	var t store.Timeouts
	for _, f := range []struct {
		name      string
		val, dest *time.Duration
	}{
		{"connect-timeout", &g.Timeouts.Connect, &t.Connect},
		{"timeout", &g.Timeouts.Header, &t.Header},
		{"idle-timeout", &g.Timeouts.Idle, &t.Idle},
	} {
		if !g.flags.Changed(f.name) {
			continue
		}
		if *f.val <= 0 {
			return t, usagef("--%s %s: want a positive duration such as 30s", f.name, *f.val)
		}
		*f.dest = *f.val
	}
	return t, nil
}

// openDataset opens the dataset at a URL.
func (g *globalOptions) openDataset(ctx context.Context, rawURL string, opts ...commit.Option) (*commit.Dataset, error) {
	s, err := g.openStore(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	return commit.New(s, append([]commit.Option{commit.WithLogger(g.log())}, opts...)...), nil
}

// workers is how many files put, get, sync and verify handle at once: the
// command's --concurrency if given (not 0), else --transfers if given, else
// on a remote store as many as its adaptive window keeps in flight at most,
// so that the window bounds the requests, and 16 on a local one.
func (g *globalOptions) workers(rawURL string, concurrency int) int {
	switch {
	case concurrency > 0:
		return concurrency
	case g.Transfers > 0:
		return g.Transfers
	}
	if u, err := store.ParseURL(rawURL); err == nil && u.Scheme != "file" && u.Scheme != "mem" {
		return store.MaxTransfers
	}
	return localWorkers
}

// localWorkers is how many files a command handles at once on a local
// store unless told otherwise.
const localWorkers = 16

// manifestCache is the Dataset option of put, get and sync: the manifests
// they read and write are kept under the user's cache directory, by the
// sha256 the pointer records (commit.WithManifestCache). Without a cache
// directory, with --no-cache, or with --sse-c-key (whose user keeps even
// the list of files encrypted), none are kept.
func (g *globalOptions) manifestCache() commit.Option {
	if g.NoCache || g.SSECKey != "" {
		return commit.WithManifestCache("")
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return commit.WithManifestCache("")
	}
	return commit.WithManifestCache(filepath.Join(dir, "publish", "manifests"))
}

// redact returns the URL for messages, without user information.
func redact(rawURL string) string {
	u, err := store.ParseURL(rawURL)
	if err != nil {
		return "(bad URL)"
	}
	return u.Redacted()
}

// describe adds the dataset URL and, for a corrupt pointer, its key, to an
// error from reading a dataset.
func describe(rawURL string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, pointer.ErrCorrupt):
		return fmt.Errorf("dataset %s: pointer %q: %w (nothing was changed)", redact(rawURL), pointer.Key, err)
	case errors.Is(err, generation.ErrCorrupt):
		return fmt.Errorf("dataset %s: %w (nothing was changed)", redact(rawURL), err)
	case errors.Is(err, commit.ErrNoCommits):
		return fmt.Errorf("dataset %s: %w", redact(rawURL), err)
	case errors.Is(err, commit.ErrMissing):
		return fmt.Errorf("dataset %s: %w\n'publish verify %s' lists every missing object; 'publish verify --repair SRC' uploads them again from a copy", redact(rawURL), err, redact(rawURL))
	}
	return fmt.Errorf("dataset %s: %w", redact(rawURL), err)
}

// refFlags select a snapshot: the current one, or an older retained one by
// seq or generation.
type refFlags struct {
	Seq uint64
	Gen string
	Tag string
}

func (r *refFlags) AddFlags(cmd *cobra.Command) {
	cmd.Flags().Uint64Var(&r.Seq, "seq", 0, "read the retained snapshot with this seq instead of the current one")
	cmd.Flags().StringVar(&r.Gen, "gen", "", "read the retained snapshot of this generation instead of the current one")
	cmd.Flags().StringVar(&r.Tag, "tag", "", "read the snapshot this tag names instead of the current one")
	cmd.MarkFlagsMutuallyExclusive("seq", "gen", "tag")
}

// checkRef checks a reference to a snapshot given as an argument: a seq
// number, a generation id or tag:NAME.
func checkRef(ref string) error {
	if name, ok := strings.CutPrefix(ref, commit.TagRefPrefix); ok {
		if err := commit.ValidTagName(name); err != nil {
			return &usageError{err}
		}
		return nil
	}
	if _, err := strconv.ParseUint(ref, 10, 64); err != nil && generation.Valid(ref) != nil {
		return usagef("%q is neither a seq number, a generation id nor tag:NAME", ref)
	}
	return nil
}

// ref returns the reference OpenAt takes, or "" for the current snapshot.
func (r refFlags) ref() (string, error) {
	switch {
	case r.Seq != 0:
		return fmt.Sprint(r.Seq), nil
	case r.Gen != "":
		if err := generation.Valid(r.Gen); err != nil {
			return "", &usageError{err}
		}
		return r.Gen, nil
	case r.Tag != "":
		if err := commit.ValidTagName(r.Tag); err != nil {
			return "", &usageError{err}
		}
		return commit.TagRefPrefix + r.Tag, nil
	}
	return "", nil
}

// openSnapshot opens the current snapshot, or the one ref names (a seq
// number, a generation id or tag:NAME, resolved as commit.ParseRef reads it).
func openSnapshot(ctx context.Context, d *commit.Dataset, rawURL, ref string) (*commit.Snapshot, error) {
	r, err := commit.ParseRef(ref)
	if err != nil {
		return nil, &usageError{err}
	}
	snap, err := d.OpenRef(ctx, r)
	return snap, describe(rawURL, err)
}

// openRef opens the dataset at rawURL and the snapshot r selects.
func (g *globalOptions) openRef(ctx context.Context, rawURL string, r refFlags) (*commit.Snapshot, error) {
	ref, err := r.ref()
	if err != nil {
		return nil, err
	}
	d, err := g.openDataset(ctx, rawURL)
	if err != nil {
		return nil, err
	}
	return openSnapshot(ctx, d, rawURL, ref)
}

// isTerminal reports whether w is a terminal, for progress bars.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// writeJSON writes v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// humanBytes formats a byte count with binary units.
func humanBytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// splitDash splits positional args at "--": the ones before, and the
// command after. Without "--", everything after the first n is the command.
func splitDash(cmd *cobra.Command, args []string, n int) (before, command []string, err error) {
	at := cmd.ArgsLenAtDash()
	if at < 0 {
		at = min(n, len(args))
	}
	before, command = args[:at], args[at:]
	if len(command) == 0 {
		return nil, nil, usagef("no command given after --")
	}
	return before, command, nil
}
