package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"

	"github.com/spf13/cobra"
)

// filterHelp is what the help of each command that takes filters says of
// them; filterRules, the topic 'publish help filters', gives the rules.
const filterHelp = `Filters. --exclude GLOB, --include GLOB and --exclude-from FILE select
files by their dataset paths with rclone's glob syntax; the first rule
that matches decides. See 'publish help filters'.`

// newFiltersTopic returns the help topic of the filter rules.
func newFiltersTopic() *cobra.Command {
	return &cobra.Command{
		Use:   "filters",
		Short: "How --exclude, --include and --exclude-from select files",
		Long:  filterRules,
	}
}

const filterRules = `--exclude GLOB and --include GLOB (both repeatable) and
--exclude-from FILE (one GLOB a line; blank lines and lines starting with
# are skipped) form one list of rules, in the order given on the command
line. Each file's dataset path (relative to SRC or to the snapshot's root,
separated by /) is tried against the rules in order; the first rule that
matches decides. A file no rule matches is included, unless at least one
--include was given: then it is excluded. In a GLOB, * matches any run of
characters other than /, ** any run including /, ? one character other
than /, [abc] and [!abc] a character class, {a,b} either alternative, and
\ quotes the next character. A GLOB starting with / is anchored at the
root and matches the whole path; any other GLOB matches the whole path or
its end from the start of a segment: *.log matches a.log and x/y/a.log;
b.log matches b.log and x/b.log, not xb.log. So --exclude 'tmp/**' leaves
out every file below any directory named tmp, --exclude '/tmp/**' only
those below the top one. The GLOB syntax is rclone's; here --include and
--exclude may be mixed freely, and keep their command-line order. Empty
directories are not published.`

// filterRule is one --include or --exclude.
type filterRule struct {
	include bool
	glob    string
	re      *regexp.Regexp
}

// filters is an ordered list of rules; the zero value includes everything.
type filters struct {
	rules    []filterRule
	includes bool // some rule includes: unmatched files are excluded
}

// ruleFlag is a pflag.Value that appends to a shared rule list, so that
// --include and --exclude keep their relative order.
type ruleFlag struct {
	f       *filters
	include bool
	from    bool // the value names a file of exclude GLOBs
}

func (r ruleFlag) String() string { return "" }
func (r ruleFlag) Type() string {
	if r.from {
		return "FILE"
	}
	return "GLOB"
}

func (r ruleFlag) Set(v string) error {
	if !r.from {
		return r.f.add(r.include, v)
	}
	fh, err := os.Open(v)
	if err != nil {
		return fmt.Errorf("--exclude-from %s: %w", v, unwrapPathError(err))
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	for line := 1; sc.Scan(); line++ {
		g := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(g) == "" || strings.HasPrefix(g, "#") {
			continue
		}
		if err := r.f.add(false, g); err != nil {
			return fmt.Errorf("%s:%d: %w", v, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("--exclude-from %s: %w", v, err)
	}
	return nil
}

// AddFlags adds --include, --exclude and --exclude-from; what is put, got
// or synced completes the sentence "FILES of ...".
func (f *filters) AddFlags(cmd *cobra.Command, what string) {
	fl := cmd.Flags()
	fl.Var(ruleFlag{f: f, include: false}, "exclude", "leave out the "+what+" files whose path matches `GLOB` (repeatable; see Filters)")
	fl.Var(ruleFlag{f: f, include: true}, "include", "take only the "+what+" files whose path matches `GLOB`, unless an earlier rule excluded them (repeatable; see Filters)")
	fl.Var(ruleFlag{f: f, from: true}, "exclude-from", "read --exclude GLOBs from `FILE`, one a line (repeatable)")
}

func (f *filters) add(include bool, glob string) error {
	re, err := compileGlob(glob)
	if err != nil {
		return err
	}
	f.rules = append(f.rules, filterRule{include: include, glob: glob, re: re})
	f.includes = f.includes || include
	return nil
}

// Match reports whether the dataset path p is selected.
func (f *filters) Match(p string) bool {
	for _, r := range f.rules {
		if r.re.MatchString(p) {
			return r.include
		}
	}
	return !f.includes
}

// Active reports whether any rule was given.
func (f *filters) Active() bool { return len(f.rules) > 0 }

// compileGlob turns a GLOB into a regular expression over slash-separated
// paths; see filterHelp.
func compileGlob(glob string) (*regexp.Regexp, error) {
	bad := func(why string) error { return usagef("filter %q: %s", glob, why) }
	if glob == "" || glob == "/" {
		return nil, bad("empty pattern")
	}
	var b strings.Builder
	g := glob
	if rest, ok := strings.CutPrefix(g, "/"); ok {
		b.WriteString("^")
		g = rest
	} else {
		b.WriteString("(?:^|/)")
	}
	braces := 0
	for i := 0; i < len(g); i++ {
		c := g[i]
		switch {
		case c == '*' && i+1 < len(g) && g[i+1] == '*':
			b.WriteString(".*")
			i++
		case c == '*':
			b.WriteString("[^/]*")
		case c == '?':
			b.WriteString("[^/]")
		case c == '\\':
			if i+1 == len(g) {
				return nil, bad("ends with \\")
			}
			i++
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		case c == '[':
			j := strings.IndexByte(g[i+1:], ']')
			if j < 0 {
				return nil, bad("[ without ]")
			}
			class := g[i+1 : i+1+j]
			if class == "" || class == "!" {
				return nil, bad("empty character class")
			}
			if rest, ok := strings.CutPrefix(class, "!"); ok {
				// Like *, a negated class stays within one segment.
				class = "^/" + rest
			} else if strings.HasPrefix(class, "^") {
				class = `\^` + class[1:]
			}
			b.WriteString("[" + strings.ReplaceAll(class, `\`, `\\`) + "]")
			i += j + 1
		case c == '{':
			braces++
			b.WriteString("(?:")
		case c == ',' && braces > 0:
			b.WriteString("|")
		case c == '}' && braces > 0:
			braces--
			b.WriteString(")")
		default:
			b.WriteString(regexp.QuoteMeta(g[i : i+1]))
		}
	}
	if braces > 0 {
		return nil, bad("{ without }")
	}
	b.WriteString("$")
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, bad(err.Error())
	}
	return re, nil
}
