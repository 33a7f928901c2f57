// Package perf holds the side-by-side benchmarks of commitptr against the
// protocol's floor: the same requests sent through the raw aws-sdk-go-v2
// client, with no library, to the same S3 server in the same run. Each
// iteration runs both, in alternating order, and the benchmark reports the
// ratio of their total times.
//
//	go test -run - -bench Floor -benchtime 200x ./tests/perf
package perf

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/google/uuid"
	"golang.org/x/sync/errgroup"

	"github.com/commitptr/commitptr/commit"
	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store"
	s3store "github.com/commitptr/commitptr/store/s3"
)

func TestMain(m *testing.M) { os.Exit(testenv.Main(m)) }

const concurrency = 16

type pair struct {
	raw    *awss3.Client
	bucket string
	ds     *commit.Dataset
	count  *store.Counter
}

func setup(b *testing.B) *pair {
	b.Helper()
	ctx := context.Background()
	srv := testenv.S3(b)
	bucket := srv.NewBucket(b)
	creds := credentials.NewStaticCredentialsProvider(srv.AccessKey, srv.SecretKey, "")
	cfg, err := config.LoadDefaultConfig(ctx, config.WithRegion(srv.Region), config.WithCredentialsProvider(creds))
	if err != nil {
		b.Fatal(err)
	}
	raw := awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		o.BaseEndpoint = aws.String(srv.Endpoint)
		o.UsePathStyle = true
	})
	b.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	b.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	st, err := s3store.New(ctx, s3store.Options{Bucket: bucket, Endpoint: srv.Endpoint, Region: srv.Region, PathStyle: true})
	if err != nil {
		b.Fatal(err)
	}
	c := store.Count(store.WithPrefix(st, "cp/"))
	return &pair{raw: raw, bucket: bucket, ds: commit.New(c, commit.WithConcurrency(concurrency)), count: c}
}

// rawCommit sends the floor of a commit of the files: K data PUTs, one
// manifest PUT, one pointer GET and one pointer PUT with If-Match.
func (p *pair) rawCommit(ctx context.Context, files map[string][]byte) error {
	gen := uuid.NewString()
	etag := ""
	out, err := p.raw.GetObject(ctx, &awss3.GetObjectInput{Bucket: &p.bucket, Key: aws.String("raw/_pointer")})
	if err == nil {
		_, _ = io.Copy(io.Discard, out.Body) // only the ETag is needed
		out.Body.Close()
		etag = aws.ToString(out.ETag)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for name, data := range files {
		g.Go(func() error {
			_, err := p.raw.PutObject(gctx, &awss3.PutObjectInput{Bucket: &p.bucket, Key: aws.String("raw/_gen/" + gen + "/" + name), Body: bytes.NewReader(data)})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	manifest, _ := json.Marshal(map[string]any{"generation": gen, "files": len(files)})
	if _, err := p.raw.PutObject(ctx, &awss3.PutObjectInput{Bucket: &p.bucket, Key: aws.String("raw/_gen/" + gen + "/_manifest"), Body: bytes.NewReader(manifest), IfNoneMatch: aws.String("*")}); err != nil {
		return err
	}
	in := &awss3.PutObjectInput{Bucket: &p.bucket, Key: aws.String("raw/_pointer"), Body: bytes.NewReader([]byte(gen))}
	if etag != "" {
		in.IfMatch = aws.String(etag)
	} else {
		in.IfNoneMatch = aws.String("*")
	}
	_, err = p.raw.PutObject(ctx, in)
	return err
}

// rawRead sends the floor of a snapshot read: pointer GET, manifest GET and
// one GET per file.
func (p *pair) rawRead(ctx context.Context, names []string) error {
	out, err := p.raw.GetObject(ctx, &awss3.GetObjectInput{Bucket: &p.bucket, Key: aws.String("raw/_pointer")})
	if err != nil {
		return err
	}
	gen, _ := io.ReadAll(out.Body)
	out.Body.Close()
	keys := []string{"raw/_gen/" + string(gen) + "/_manifest"}
	for _, n := range names {
		keys = append(keys, "raw/_gen/"+string(gen)+"/"+n)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for i, k := range keys {
		get := func() error {
			o, err := p.raw.GetObject(gctx, &awss3.GetObjectInput{Bucket: &p.bucket, Key: aws.String(k)})
			if err != nil {
				return err
			}
			defer o.Body.Close()
			_, err = io.Copy(io.Discard, o.Body)
			return err
		}
		if i == 0 { // the manifest comes first: it names the files
			if err := get(); err != nil {
				return err
			}
			continue
		}
		g.Go(get)
	}
	return g.Wait()
}

func (p *pair) commit(ctx context.Context, files map[string][]byte) error {
	tx, err := p.ds.Begin(ctx)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for name, data := range files {
		g.Go(func() error { return tx.PutBytes(gctx, name, data) })
	}
	if err := g.Wait(); err != nil {
		return err
	}
	_, err = tx.Commit(ctx, commit.CommitOptions{})
	return err
}

func (p *pair) read(ctx context.Context) error {
	snap, err := p.ds.Open(ctx)
	if err != nil {
		return err
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for _, e := range snap.Files() {
		g.Go(func() error {
			rc, err := snap.OpenEntry(gctx, e)
			if err != nil {
				return err
			}
			defer rc.Close()
			_, err = io.Copy(io.Discard, rc)
			return err
		})
	}
	return g.Wait()
}

func makeFiles(k, size int) (map[string][]byte, []string) {
	files := map[string][]byte{}
	var names []string
	for i := range k {
		data := make([]byte, size)
		rand.Read(data)
		name := "part-" + strconv.Itoa(i)
		files[name] = data
		names = append(names, name)
	}
	return files, names
}

// sideBySide times ours and the floor's version of one operation per
// iteration, alternating which goes first, and reports both means and
// their ratio.
func sideBySide(b *testing.B, ours, floor func() error) {
	var tOurs, tFloor time.Duration
	i := 0
	for b.Loop() {
		run := func(f func() error, acc *time.Duration) {
			start := time.Now()
			if err := f(); err != nil {
				b.Fatal(err)
			}
			*acc += time.Since(start)
		}
		if i%2 == 0 {
			run(ours, &tOurs)
			run(floor, &tFloor)
		} else {
			run(floor, &tFloor)
			run(ours, &tOurs)
		}
		i++
	}
	b.ReportMetric(float64(tOurs.Microseconds())/float64(i)/1000, "ms/commitptr")
	b.ReportMetric(float64(tFloor.Microseconds())/float64(i)/1000, "ms/floor")
	b.ReportMetric(float64(tOurs)/float64(tFloor), "ratio")
}

// BenchmarkFloorCommit: commit of K files of 4 KiB, commitptr against the
// raw-SDK floor.
func BenchmarkFloorCommit(b *testing.B) {
	for _, k := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("K=%d", k), func(b *testing.B) {
			ctx := context.Background()
			p := setup(b)
			files, _ := makeFiles(k, 4<<10)
			before := p.count.Counts()
			sideBySide(b, func() error { return p.commit(ctx, files) }, func() error { return p.rawCommit(ctx, files) })
			used := p.count.Counts().Sub(before)
			b.ReportMetric(float64(used.Total())/float64(b.N), "req/op")
		})
	}
}

// BenchmarkFloorRead: snapshot read of K files of 4 KiB, commitptr (with
// checksum verification) against the raw-SDK floor.
func BenchmarkFloorRead(b *testing.B) {
	for _, k := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("K=%d", k), func(b *testing.B) {
			ctx := context.Background()
			p := setup(b)
			files, names := makeFiles(k, 4<<10)
			if err := p.commit(ctx, files); err != nil {
				b.Fatal(err)
			}
			if err := p.rawCommit(ctx, files); err != nil {
				b.Fatal(err)
			}
			before := p.count.Counts()
			sideBySide(b, func() error { return p.read(ctx) }, func() error { return p.rawRead(ctx, names) })
			used := p.count.Counts().Sub(before)
			b.ReportMetric(float64(used.Total())/float64(b.N), "req/op")
		})
	}
}
