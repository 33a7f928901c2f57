package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/commitptr/commitptr/internal/testenv"
	"github.com/commitptr/commitptr/store/storetest"
)

// TestVersionedBucket runs 5 puts of a dataset, 40 updates of an object
// beside it, a probe and a gc on a bucket with versioning enabled, and
// counts what the bucket holds afterwards. With the drivers' version deletes, no delete marker is left,
// no older version of a generation object and nothing of the probe, and
// the gc report counts the bytes of the versions it deleted. With
// versioning=off declared (deletes that only add delete markers, as
// before the drivers knew of versions), the report says nothing was freed.
func TestVersionedBucket(t *testing.T) {
	vgw := testenv.VersionedS3(t)
	fake := testenv.Gofakes3(t)
	for _, c := range []struct {
		name, scheme string
		srv          *testenv.S3Server
		query        string
	}{
		{"s3", "s3", vgw, ""},
		{"minio", "minio", vgw, ""},
		{"s3-gofakes3", "s3", fake, ""},
		{"minio-gofakes3", "minio", fake, ""},
		{"s3-declared-off", "s3", vgw, "?versioning=off"},
	} {
		t.Run(c.name, func(t *testing.T) {
			tg := remoteTarget(c.name, c.scheme, c.srv)
			bucket := c.srv.NewVersionedBucket(t)
			const prefix = "datasets/daily/"
			url := c.scheme + "://" + bucket + "/" + strings.TrimSuffix(prefix, "/") + c.query
			tree := func(i int) string {
				return writeTree(t, map[string]string{"a.txt": fmt.Sprint("put ", i), fmt.Sprintf("only-%d.txt", i): "x"})
			}
			tg.ok(t, "put", tree(0), url)
			// Four more at once: a put that loses the race discards what
			// it staged, every version of it.
			codes := make([]int, 4)
			var wg sync.WaitGroup
			for i := range codes {
				dir := tree(i + 1)
				wg.Go(func() { codes[i] = tg.run(t, "put", dir, url).code })
			}
			wg.Wait()
			losers := 0
			for _, code := range codes {
				require.Contains(t, []int{exitOK, exitLost}, code)
				if code == exitLost {
					losers++
				}
			}
			for range 40 {
				tg.ok(t, "update", url, "counter", "--", "sh", "-c", `read n; echo $(( ${n:-0} + 1 ))`)
			}
			probe := tg.ok(t, "probe", url)
			before := c.srv.Versions(t, bucket, prefix)

			var rep struct {
				ObjectsDeleted int   `json:"objects_deleted"`
				BytesDeleted   int64 `json:"bytes_deleted"`
				Versions       struct {
					Versioned bool  `json:"versioned"`
					Versions  int   `json:"versions"`
					Markers   int   `json:"delete_markers"`
					Bytes     int64 `json:"bytes"`
				} `json:"versions"`
			}
			out := tg.ok(t, "--json", "gc", "--keep", "0", "--grace", "0", "--orphan-age", "0", url)
			require.NoError(t, json.Unmarshal([]byte(out), &rep), out)
			after := c.srv.Versions(t, bucket, prefix)
			assert.Equal(t, "40", strings.TrimSpace(string(readObject(t, tg.open(t, url), "counter"))))
			t.Logf("%s: %d of 5 puts lost the race; %d entries, %d delete markers before gc; %d entries, %d delete markers after; gc deleted %d objects, freed %d bytes",
				c.name, losers, len(before), markers(before), len(after), markers(after), rep.ObjectsDeleted, rep.BytesDeleted)
			require.Positive(t, rep.ObjectsDeleted)
			assert.True(t, rep.Versions.Versioned)

			if c.query != "" {
				assert.Contains(t, probe, "versioning: off")
				assert.Positive(t, markers(after), "plain deletes add markers")
				assert.Zero(t, rep.BytesDeleted, "a delete that adds a marker frees nothing")
				assert.Zero(t, rep.Versions.Versions+rep.Versions.Markers)
				return
			}
			assert.Contains(t, probe, "versioning: on")
			assert.Zero(t, markers(before), "the probe and the losers leave no marker")
			assert.Zero(t, markers(after))
			left := map[string]bool{}
			for _, v := range after {
				key := strings.TrimPrefix(v.Key, prefix)
				left[v.Key+"\x00"+v.ID] = true
				assert.False(t, strings.HasPrefix(key, "_probe/"), "probe leftover %s", v.Key)
				if strings.HasPrefix(key, "_gen/") {
					assert.True(t, v.Latest, "an older version of a generation object: %s %s", v.Key, v.ID)
				}
			}
			var freed int64
			for _, v := range before {
				if !left[v.Key+"\x00"+v.ID] {
					freed += v.Size
				}
			}
			assert.Equal(t, freed, rep.BytesDeleted, "the bytes of the versions gone")
			assert.Equal(t, rep.BytesDeleted, rep.Versions.Bytes)
		})
	}
}

func markers(vs []storetest.ObjectVersion) int {
	n := 0
	for _, v := range vs {
		if v.Marker {
			n++
		}
	}
	return n
}
