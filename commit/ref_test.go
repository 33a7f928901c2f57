package commit_test

import (
	"testing"

	"github.com/commitptr/commitptr/commit"
)

func TestParseRefReadsEveryFormAndStringReadsBack(t *testing.T) {
	gen := "0194b3a4-7c1e-7d2a-9f00-1234567890ab"
	cases := []struct {
		in   string
		want commit.Ref
	}{
		{"current", commit.Current},
		{"", commit.Current},
		{"@42", commit.SeqRef(42)},
		{"42", commit.SeqRef(42)},
		{"tag:release-1", commit.TagRef("release-1")},
		{"gen:" + gen, commit.GenRef(gen)},
		{gen, commit.GenRef(gen)},
	}
	for _, c := range cases {
		got, err := commit.ParseRef(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRef(%q) = %v, %v; want %v", c.in, got, err, c.want)
			continue
		}
		back, err := commit.ParseRef(got.String())
		if err != nil || back != got {
			t.Errorf("ParseRef(%q.String() = %q) = %v, %v", c.in, got.String(), back, err)
		}
	}
}

func TestParseRefRefusesWhatNamesNoSnapshot(t *testing.T) {
	for _, in := range []string{"@", "@-1", "@+4", "tag:", "gen:nope", "latest", "cur rent", "tag:a/b"} {
		if r, err := commit.ParseRef(in); err == nil {
			t.Errorf("ParseRef(%q) = %v, want an error", in, r)
		}
	}
}
