package commitptr_test

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"
)

// layers is the layering of docs/ARCHITECTURE.md: a library package
// imports only packages of lower layers. Paths are relative to the module.
var layers = map[string]int{
	"examples": 13, "examples/*": 13,
	".": 12, "cmd/publish": 12,
	"internal/bench":             11,
	"gc":                         10,
	"serve":                      9,
	"job":                        9,
	"mount":                      9,
	"commit":                     8,
	"commit/internal/group":      7,
	"pointer":                    6,
	"lease":                      6,
	"object":                     6,
	"generation":                 5,
	"store/mem":                  4,
	"store/fs":                   4,
	"store/s3":                   4,
	"store/minio":                4,
	"store/gcs":                  4,
	"store/azblob":               4,
	"store/internal/partupload":  3,
	"store/internal/inflight":    3,
	"store/internal/httptimeout": 2,
	"store/internal/versions":    3,
	"store/internal/portable":    2,
	"store/internal/s3util":      2,
	"store":                      1,
	"internal/ctxtime":           0,
	"internal/strictjson":        0,
	"internal/localfile":         0,
}

// testSupport are the packages only tests import. The packages under
// tests/, which hold tests only, are test support too (isTestSupport).
// Test support may import any package of the module.
var testSupport = map[string]bool{
	"store/storetest": true, "internal/faults": true,
	"internal/faults/remote": true, "internal/testenv": true, "internal/procattr": true,
	"internal/wanproxy": true, "internal/wanproxy/cmd/wanproxy": true,
}

func isTestSupport(rel string) bool {
	return testSupport[rel] || strings.HasPrefix(rel, "tests/")
}

const module = "github.com/commitptr/commitptr"

func layerOf(rel string) (int, bool) {
	if l, ok := layers[rel]; ok {
		return l, true
	}
	if strings.HasPrefix(rel, "examples/") {
		return layers["examples/*"], true
	}
	return 0, false
}

func relative(path string) string {
	if path == module {
		return "."
	}
	return strings.TrimPrefix(path, module+"/")
}

// TestImportsPointDownward: every package of the module is in the layer
// table or is test support; a library package imports only packages of
// lower layers, and never test support.
func TestImportsPointDownward(t *testing.T) {
	out, err := exec.Command("go", "list", "-json=ImportPath,Imports", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		seen++
		rel := relative(p.ImportPath)
		if isTestSupport(rel) {
			continue
		}
		layer, ok := layerOf(rel)
		if !ok {
			t.Errorf("package %s is in no layer of docs/ARCHITECTURE.md", rel)
			continue
		}
		for _, imp := range p.Imports {
			if imp != module && !strings.HasPrefix(imp, module+"/") {
				continue
			}
			ir := relative(imp)
			if isTestSupport(ir) {
				t.Errorf("%s imports test support %s", rel, ir)
				continue
			}
			il, ok := layerOf(ir)
			if ok && il >= layer {
				t.Errorf("%s (layer %d) imports %s (layer %d): imports point only downward", rel, layer, ir, il)
			}
		}
	}
	if seen < len(layers) {
		t.Fatalf("go list showed %d packages, fewer than the %d layered", seen, len(layers))
	}
}
