package serve_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/internal/wanproxy"
	"github.com/commitptr/commitptr/serve"
	"github.com/commitptr/commitptr/store"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

// benchStores are the stores the benchmarks read from: the file system and
// S3 (the versitygw test server on loopback).
func benchStores() []testenv.Factory {
	var out []testenv.Factory
	for _, f := range testenv.Stores() {
		if f.Name == "fs" || f.Name == "s3" {
			out = append(out, f)
		}
	}
	return out
}

// BenchmarkGet1MiB reads 1 MiB files, verified, directly from the store
// (commit.Snapshot.Open, as publish get reads) and through serve (an S3
// GetObject over loopback HTTP), one of each per op.
func BenchmarkGet1MiB(b *testing.B) {
	const files = 16
	body := make([]byte, 1<<20)
	_, _ = rand.Read(body)
	for _, f := range benchStores() {
		d := commit.New(f.New(b))
		ctx := context.Background()
		tx, err := d.Begin(ctx)
		require.NoError(b, err)
		for i := range files {
			require.NoError(b, tx.PutBytes(ctx, fmt.Sprintf("f%02d", i), body))
		}
		_, err = tx.Commit(ctx, commit.CommitOptions{})
		require.NoError(b, err)
		snap, err := d.Open(ctx)
		require.NoError(b, err)
		url := startServer(b, map[string]*commit.Dataset{"daily": d}, serve.Options{})
		c := s3Client(url, "any", "any")

		direct := func(i int) {
			rc, err := snap.Open(ctx, fmt.Sprintf("f%02d", i%files))
			require.NoError(b, err)
			n, err := io.Copy(io.Discard, rc)
			rc.Close()
			require.NoError(b, err)
			require.EqualValues(b, len(body), n)
		}
		served := func(i int) {
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("daily"), Key: aws.String(fmt.Sprintf("current/f%02d", i%files))})
			require.NoError(b, err)
			n, err := io.Copy(io.Discard, out.Body)
			out.Body.Close()
			require.NoError(b, err)
			require.EqualValues(b, len(body), n)
		}
		b.Run(f.Name, func(b *testing.B) { sideBySide(b, int64(len(body)), direct, served) })
	}
}

// sideBySide runs direct and served alternately, one of each per op, so
// that both see the same machine, and reports the throughput of each and
// their ratio.
func sideBySide(b *testing.B, bytes int64, direct, served func(i int)) {
	var td, ts time.Duration
	i := 0
	for b.Loop() {
		t0 := time.Now()
		direct(i)
		t1 := time.Now()
		served(i)
		td += t1.Sub(t0)
		ts += time.Since(t1)
		i++
	}
	if bytes > 0 {
		b.ReportMetric(float64(bytes*int64(i))/td.Seconds()/1e6, "direct-MB/s")
		b.ReportMetric(float64(bytes*int64(i))/ts.Seconds()/1e6, "serve-MB/s")
	} else {
		b.ReportMetric(td.Seconds()/float64(i), "direct-s/op")
		b.ReportMetric(ts.Seconds()/float64(i), "serve-s/op")
	}
	b.ReportMetric(td.Seconds()/ts.Seconds(), "serve/direct")
}

// BenchmarkGet1MiBStoreAway reads 1 MiB files, verified, from an S3 store
// a network away: the S3 test server behind internal/wanproxy, which adds
// the round trip rtt to every request. The direct reader resolves the
// snapshot once and then GETs each file through the library, as publish
// get reads a dataset; serve runs beside its readers, which ask it over
// loopback. Each op, readers readers each read 4 files directly and 4
// through serve, the two phases in turns. Beside the throughputs and their
// ratio it reports the store requests per file read of each, counted once
// both are warm: the floor is 1 GET.
func BenchmarkGet1MiBStoreAway(b *testing.B) {
	const files = 16
	body := make([]byte, 1<<20)
	_, _ = rand.Read(body)
	ctx := context.Background()
	srv := testenv.S3(b)
	srv.UseCredentials()
	bucket := srv.NewBucket(b)
	open := func(endpoint string) store.Store {
		s, err := store.Open(ctx, "s3://"+bucket, store.Config{Endpoint: endpoint, PathStyle: true})
		require.NoError(b, err)
		return s
	}
	tx, err := commit.New(open(srv.Endpoint)).Begin(ctx)
	require.NoError(b, err)
	for i := range files {
		require.NoError(b, tx.PutBytes(ctx, fmt.Sprintf("f%02d", i), body))
	}
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(b, err)

	for _, rtt := range []time.Duration{10 * time.Millisecond, 30 * time.Millisecond} {
		p, err := wanproxy.Start("127.0.0.1:0", srv.Endpoint, rtt/2, nil)
		require.NoError(b, err)
		b.Cleanup(func() { p.Close() })
		directStore, serveStore := store.Count(open(p.URL)), store.Count(open(p.URL))
		snap, err := commit.New(directStore).Open(ctx)
		require.NoError(b, err)
		url := startServer(b, map[string]*commit.Dataset{"daily": commit.New(serveStore)}, serve.Options{})
		// The readers of serve keep as many connections as the direct
		// ones (the SDK's default keeps 10, so 16 readers would connect
		// again and again).
		c := s3.New(s3.Options{
			BaseEndpoint: aws.String(url),
			Region:       "us-east-1",
			UsePathStyle: true,
			Credentials:  credentials.NewStaticCredentialsProvider("any", "any", ""),
			HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
				t.MaxIdleConnsPerHost = 64
			}),
		})

		direct := func(i int) {
			rc, err := snap.Open(ctx, fmt.Sprintf("f%02d", i%files))
			require.NoError(b, err)
			n, err := io.Copy(io.Discard, rc)
			rc.Close()
			require.NoError(b, err)
			require.EqualValues(b, len(body), n)
		}
		served := func(i int) {
			out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("daily"), Key: aws.String(fmt.Sprintf("current/f%02d", i%files))})
			require.NoError(b, err)
			n, err := io.Copy(io.Discard, out.Body)
			out.Body.Close()
			require.NoError(b, err)
			require.EqualValues(b, len(body), n)
		}
		for _, readers := range []int{1, 16} {
			b.Run(fmt.Sprintf("rtt=%s/readers=%d", rtt, readers), func(b *testing.B) {
				sideBySideReaders(b, readers, 4, int64(len(body)), direct, served, directStore, serveStore)
			})
		}
	}
}

// sideBySideReaders runs a phase of direct reads and one of served reads
// per op, in turns, each phase readers goroutines reading per files each,
// and reports the throughput of each, their ratio, and the store requests
// per file read of each (from the counters, once both are warm).
func sideBySideReaders(b *testing.B, readers, per int, bytes int64, direct, served func(i int), directStore, serveStore *store.Counter) {
	phase := func(read func(int), op int) time.Duration {
		var wg sync.WaitGroup
		t0 := time.Now()
		for r := range readers {
			wg.Go(func() {
				for k := range per {
					read(op + r*per + k)
				}
			})
		}
		wg.Wait()
		return time.Since(t0)
	}
	phase(direct, 0) // warm: connections, the manifest, the pin
	phase(served, 0)
	d0, s0 := directStore.Counts(), serveStore.Counts()
	var td, ts time.Duration
	op := 0
	for b.Loop() {
		if op%2 == 0 {
			td += phase(direct, op)
			ts += phase(served, op)
		} else {
			ts += phase(served, op)
			td += phase(direct, op)
		}
		op++
	}
	reads := float64(op * readers * per)
	b.ReportMetric(float64(bytes)*reads/td.Seconds()/1e6, "direct-MB/s")
	b.ReportMetric(float64(bytes)*reads/ts.Seconds()/1e6, "serve-MB/s")
	b.ReportMetric(td.Seconds()/ts.Seconds(), "serve/direct")
	b.ReportMetric(float64(directStore.Counts().Sub(d0).Total())/reads, "direct-req/read")
	b.ReportMetric(float64(serveStore.Counts().Sub(s0).Total())/reads, "serve-req/read")
}

// BenchmarkList100k lists a snapshot of 100,000 files in pages of 1,000:
// directly (a LIST of the generation's prefix in the store) and through
// serve (ListObjectsV2 of current/). One op is one whole listing of each.
func BenchmarkList100k(b *testing.B) {
	const files = 100_000
	f := benchStores()[0] // fs: 100,000 PUTs to the S3 test server take minutes
	d := commit.New(f.New(b))
	ctx := context.Background()
	tx, err := d.Begin(ctx)
	require.NoError(b, err)
	var g errgroup.Group
	g.SetLimit(32)
	for i := range files {
		g.Go(func() error {
			return tx.PutBytes(ctx, fmt.Sprintf("part=%03d/file-%06d.parquet", i/1000, i), []byte{byte(i)})
		})
	}
	require.NoError(b, g.Wait())
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	require.NoError(b, err)
	snap, err := d.Open(ctx)
	require.NoError(b, err)
	url := startServer(b, map[string]*commit.Dataset{"daily": d}, serve.Options{})
	c := s3Client(url, "any", "any")

	direct := func(int) {
		n, req := 0, store.ListRequest{Prefix: generation.Prefix(snap.Generation()), MaxKeys: 1000}
		for {
			page, err := d.Store().List(ctx, req)
			require.NoError(b, err)
			n += len(page.Objects)
			if page.Next == "" {
				break
			}
			req.Token = page.Next
		}
		require.GreaterOrEqual(b, n, files)
	}
	served := func(int) {
		n, in := 0, &s3.ListObjectsV2Input{Bucket: aws.String("daily"), Prefix: aws.String("current/"), MaxKeys: aws.Int32(1000)}
		for {
			page, err := c.ListObjectsV2(ctx, in)
			require.NoError(b, err)
			n += len(page.Contents)
			if page.NextContinuationToken == nil {
				break
			}
			in.ContinuationToken = page.NextContinuationToken
		}
		require.Equal(b, files, n)
	}
	b.Run(f.Name, func(b *testing.B) { sideBySide(b, 0, direct, served) })
}
