package localfile

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

func stat(t *testing.T, f *os.File) os.FileInfo {
	t.Helper()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return fi
}

// TestChanged: a look at an unchanged file sees nothing; a write of the
// same size is seen by its modification time, a size change by the size,
// and a change of the modification time back to what it was by the
// status change time (where the system has one).
func TestChanged(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("0123456789"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	if err := os.Chtimes(p, old, old); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	before := stat(t, f)
	if got := Changed(before, stat(t, f)); got != "" {
		t.Fatalf("unchanged file: %q", got)
	}

	if _, err := f.WriteAt([]byte("x"), 0); err != nil {
		t.Fatal(err)
	}
	if got := Changed(before, stat(t, f)); !strings.Contains(got, "modification time") {
		t.Errorf("rewritten with the same size: %q", got)
	}
	if _, err := f.WriteAt([]byte("more"), 10); err != nil {
		t.Fatal(err)
	}
	if got := Changed(before, stat(t, f)); got != "its size went from 10 to 14 bytes" {
		t.Errorf("grown: %q", got)
	}

	// The modification time set back: only the status change time
	// tells. Setting it moves the change time to the clock's present
	// tick; the loop ends once that tick is past the one the look before
	// saw (the clock's tick is milliseconds, the bound is seconds).
	if err := f.Truncate(10); err != nil {
		t.Fatal(err)
	}
	if runtime.GOOS != "linux" && runtime.GOOS != "darwin" {
		return
	}
	ctimeBefore, _ := changeTime(before)
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
		if now, _ := changeTime(stat(t, f)); !now.Equal(ctimeBefore) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the status change time never moved")
		}
	}
	after := stat(t, f)
	if after.Size() != before.Size() || !after.ModTime().Equal(before.ModTime()) {
		t.Fatalf("size and modification time should be as before: %v %v", after.Size(), after.ModTime())
	}
	if got := Changed(before, after); !strings.Contains(got, "status change time") {
		t.Errorf("only the status change time moved: %q", got)
	}
}
