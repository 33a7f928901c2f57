package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/commitptr/commitptr/generation"
)

type srcFile struct {
	path  string // dataset path
	local string
	size  int64
	// info is local as listed (os.Lstat, or os.Stat of a link's resolved
	// target): staging refuses a file that is no longer this one.
	info fs.FileInfo
}

// linkMode is --links: what put does with a symbolic link in SRC.
type linkMode string

const (
	linksRefuse    linkMode = "refuse"
	linksSkip      linkMode = "skip"
	linksFollow    linkMode = "follow"
	linksFollowAny linkMode = "follow-any"
)

func parseLinkMode(v string) (linkMode, error) {
	switch m := linkMode(v); m {
	case linksRefuse, linksSkip, linksFollow, linksFollowAny:
		return m, nil
	}
	return "", usagef("--links %q: want refuse, skip, follow or follow-any", v)
}

// collector walks SRC.
type collector struct {
	ctx   context.Context
	src   string // as given
	root  string // SRC with every symbolic link resolved
	links linkMode
	keep  *filters
	files []srcFile
	// manifest is the least size, in bytes, of the manifest listing files
	// so far; the walk stops once it passes maxManifest, since no reader
	// would accept that manifest (links followed over and over can make
	// the walk grow without bound).
	manifest, maxManifest int64
	// except is a resolved directory left out of the walk, with
	// everything below it: the destination store's own directory when
	// it lies inside SRC. excluded is told when the walk meets it.
	except   string
	excluded func(local, rel string)
}

// collect lists the files of SRC: every regular file below a directory, or
// the file itself, that the filters select. Symbolic links are handled as
// links says; special files are refused. It stops when ctx is done, and
// when SRC holds more files than one manifest can list.
func collect(ctx context.Context, src string, links linkMode, keep *filters) ([]srcFile, error) {
	return collectUpTo(ctx, src, links, keep, collectBound, nil)
}

// collectExcept is collect that leaves out the directory except (a local
// path; "" for none) and everything below it, calling excluded when the
// walk meets it.
func collectExcept(ctx context.Context, src string, links linkMode, keep *filters, except string, excluded func(local, rel string)) ([]srcFile, error) {
	return collectUpTo(ctx, src, links, keep, collectBound, func(c *collector) {
		if except == "" {
			return
		}
		real, err := filepath.EvalSymlinks(except)
		if err != nil {
			// Not there yet: nothing of it can be in SRC.
			return
		}
		if c.except, err = filepath.Abs(real); err == nil {
			c.excluded = excluded
		}
	})
}

// collectBound is the most bytes a manifest may take that collect lists
// files for: what a reader accepts.
const collectBound = generation.MaxDecoded

// collectUpTo is collect with the manifest bound as a parameter.
func collectUpTo(ctx context.Context, src string, links linkMode, keep *filters, maxManifest int64, setup func(*collector)) ([]srcFile, error) {
	fi, err := os.Lstat(src)
	if err != nil {
		return nil, fmt.Errorf("SRC %s: %w", src, unwrapPathError(err))
	}
	local := src // what is read: SRC, or the target of a SRC that is a link
	if fi.Mode()&fs.ModeSymlink != 0 {
		if links != linksFollow && links != linksFollowAny {
			return nil, fmt.Errorf("SRC %s is a symbolic link; name its target, or pass --links follow", src)
		}
		if local, err = filepath.EvalSymlinks(src); err != nil {
			return nil, fmt.Errorf("SRC %s: %w", src, unwrapPathError(err))
		}
		if fi, err = os.Lstat(local); err != nil {
			return nil, fmt.Errorf("SRC %s: %w", src, unwrapPathError(err))
		}
	}
	switch {
	case fi.Mode().IsRegular():
		name := filepath.Base(src)
		if err := generation.CheckPath(name); err != nil {
			return nil, fmt.Errorf("SRC %s: %w", src, err)
		}
		if !keep.Match(name) {
			return nil, nil
		}
		return []srcFile{{path: name, local: local, size: fi.Size(), info: fi}}, nil
	case !fi.IsDir():
		return nil, fmt.Errorf("SRC %s: not a directory or regular file", src)
	}
	root, err := filepath.EvalSymlinks(src)
	if err != nil {
		return nil, fmt.Errorf("SRC %s: %w", src, unwrapPathError(err))
	}
	if root, err = filepath.Abs(root); err != nil {
		return nil, err
	}
	c := &collector{ctx: ctx, src: src, root: root, links: links, keep: keep, maxManifest: maxManifest}
	if setup != nil {
		setup(c)
	}
	if err := c.walk(src, "", map[string]bool{root: true}); err != nil {
		return nil, err
	}
	return c.files, nil
}

// walk adds the files below the local directory dir, whose dataset path
// is prefix ("" for SRC). ancestors holds the resolved directories being
// walked, from SRC down: a link to one of them is a loop.
func (c *collector) walk(dir, prefix string, ancestors map[string]bool) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("SRC %s: %w", dir, unwrapPathError(err))
	}
	for _, de := range des {
		if err := c.ctx.Err(); err != nil {
			return fmt.Errorf("listing SRC %s: %w", c.src, context.Cause(c.ctx))
		}
		p := filepath.Join(dir, de.Name())
		rel := path.Join(prefix, de.Name())
		if err := generation.CheckPath(rel); err != nil {
			return fmt.Errorf("SRC %s: %w", p, err)
		}
		switch t := de.Type(); {
		case t.IsDir():
			real, err := filepath.EvalSymlinks(p)
			if err != nil {
				return fmt.Errorf("SRC %s: %w", p, unwrapPathError(err))
			}
			if err := c.walkDir(p, rel, real, ancestors); err != nil {
				return err
			}
		case t.IsRegular():
			fi, err := os.Lstat(p)
			if err != nil {
				return fmt.Errorf("SRC %s: %w", p, unwrapPathError(err))
			}
			if !fi.Mode().IsRegular() {
				return fmt.Errorf("SRC %s: not a regular file (%s)", p, fi.Mode().Type())
			}
			if err := c.addFile(p, p, rel, fi); err != nil {
				return err
			}
		case t&fs.ModeSymlink != 0:
			if err := c.link(p, rel, ancestors); err != nil {
				return err
			}
		default:
			return fmt.Errorf("SRC %s: not a regular file (%s)", p, t.Type())
		}
	}
	return nil
}

func (c *collector) walkDir(p, rel, real string, ancestors map[string]bool) error {
	if c.except != "" {
		if abs, err := filepath.Abs(real); err == nil && abs == c.except {
			if c.excluded != nil {
				c.excluded(p, rel)
			}
			return nil
		}
	}
	if ancestors[real] {
		return fmt.Errorf("SRC %s: symbolic link loop: it leads back to %s", p, real)
	}
	ancestors[real] = true
	defer delete(ancestors, real)
	return c.walk(p, rel, ancestors)
}

func (c *collector) addFile(p, local, rel string, info fs.FileInfo) error {
	if !c.keep.Match(rel) {
		return nil
	}
	c.manifest += int64(generation.MinEntrySize(rel))
	if c.manifest > c.maxManifest {
		return fmt.Errorf("SRC %s: more files than one generation can list: after %d files the manifest would pass the %d bytes a reader accepts (%s); publish parts of it as separate datasets, or check for symbolic links that --links follow visits over and over",
			c.src, len(c.files), c.maxManifest, p)
	}
	c.files = append(c.files, srcFile{path: rel, local: local, size: info.Size(), info: info})
	return nil
}

// link handles the symbolic link p, as --links says.
func (c *collector) link(p, rel string, ancestors map[string]bool) error {
	switch c.links {
	case linksSkip:
		return nil
	case linksRefuse:
		target, _ := os.Readlink(p)
		return fmt.Errorf("SRC %s is a symbolic link (to %s); pass --links skip to leave links out, or --links follow to publish what they point to", p, target)
	}
	// Resolving fails on a loop of links (ELOOP) and on a dangling one.
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return fmt.Errorf("SRC %s: symbolic link: %w", p, unwrapPathError(err))
	}
	if real, err = filepath.Abs(real); err != nil {
		return err
	}
	if c.links != linksFollowAny && !within(c.root, real) {
		return fmt.Errorf("SRC %s is a symbolic link to %s, outside SRC; pass --links follow-any to follow it, or --links skip", p, real)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return fmt.Errorf("SRC %s: symbolic link: %w", p, unwrapPathError(err))
	}
	switch {
	case fi.IsDir():
		return c.walkDir(p, rel, real, ancestors)
	case fi.Mode().IsRegular():
		return c.addFile(p, real, rel, fi)
	}
	return fmt.Errorf("SRC %s: symbolic link to %s, not a regular file or directory", p, real)
}

// within reports whether p is root or below it; both are clean and
// absolute.
func within(root, p string) bool {
	rel, err := filepath.Rel(root, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

func unwrapPathError(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
