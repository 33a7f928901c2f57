package fs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/commitptr/commitptr/store"
)

// List implements store.Store.
//
// It walks the directory tree below the prefix depth-first, visiting each
// directory's entries in key order (an object segment s sorts as s, a
// directory segment as s+"/"), which yields keys in lexical order. Subtrees
// that lie entirely at or before StartAfter or the token, or inside a common
// prefix already returned, are not entered, so each page costs about the
// entries it returns, plus the directories on the way.
//
// The page token is "k" followed by the last key returned, or "p" followed
// by the last common prefix returned; continuing after a common prefix skips
// every key below it.
func (s *Store) List(ctx context.Context, req store.ListRequest) (store.ListPage, error) {
	const op = "list"
	w := walker{ctx: ctx, prefix: req.Prefix, delim: req.Delimiter, max: req.MaxKeys}
	if w.max <= 0 || w.max > store.MaxListPage {
		w.max = store.MaxListPage
	}
	switch {
	case req.Token == "":
		w.after = req.StartAfter
	case req.Token[0] == 'k':
		w.after = req.Token[1:]
	case req.Token[0] == 'p':
		w.after, w.skip = req.Token[1:], req.Token[1:]
	default:
		return store.ListPage{}, store.Wrap(op, req.Prefix, nil, fmt.Errorf("fs: bad list token %q", req.Token))
	}
	if err := ctx.Err(); err != nil {
		return store.ListPage{}, s.classify(op, req.Prefix, err)
	}
	cut := strings.LastIndex(req.Prefix, "/") + 1
	dirKey, first := req.Prefix[:cut], req.Prefix[cut:]
	dir, ok := s.dirPath(dirKey)
	if !ok {
		return store.ListPage{}, nil // no valid key has this prefix
	}
	err := w.walk(dir, dirKey, first)
	if errors.Is(err, errFull) {
		w.page.Next = w.last
		err = nil
	}
	if err != nil {
		return store.ListPage{}, s.classify(op, req.Prefix, err)
	}
	return w.page, nil
}

// errFull stops the walk when the page is full and another entry exists.
var errFull = errors.New("page full")

type walker struct {
	ctx    context.Context
	prefix string
	delim  string
	max    int
	after  string // list only keys greater than this
	skip   string // and none with this prefix (a common prefix already returned)
	page   store.ListPage
	n      int
	last   string // the token for the last entry
}

type entry struct {
	seg  string // decoded segment
	name string // file or directory name
	sort string // seg, plus "/" for a directory
	obj  bool
}

// walk visits the directory dir, which holds the keys that start with
// dirKey, restricted to those whose next segment starts with first.
func (w *walker) walk(dir, dirKey, first string) error {
	if err := w.ctx.Err(); err != nil {
		return err
	}
	des, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
		return nil // empty, or removed by a concurrent Delete
	}
	if err != nil {
		return err
	}
	ents := make([]entry, 0, len(des))
	for _, de := range des {
		name := de.Name()
		if strings.HasPrefix(name, "#") { // temp files, earlier versions' lock directory
			continue
		}
		e := entry{name: name}
		switch {
		case strings.HasSuffix(name, objSuffix) && de.Type().IsRegular():
			e.obj = true
			name = strings.TrimSuffix(name, objSuffix)
		case de.IsDir():
		default:
			continue // a foreign file
		}
		seg, ok := decode(name)
		if !ok || !strings.HasPrefix(seg, first) {
			continue
		}
		e.seg, e.sort = seg, seg
		if !e.obj {
			e.sort += "/"
		}
		ents = append(ents, e)
	}
	slices.SortFunc(ents, func(a, b entry) int { return cmp.Compare(a.sort, b.sort) })

	for _, e := range ents {
		path := filepath.Join(dir, e.name)
		if e.obj {
			key := dirKey + e.seg
			if key <= w.after || (w.skip != "" && strings.HasPrefix(key, w.skip)) {
				continue
			}
			if err := w.object(key, path); err != nil {
				return err
			}
			continue
		}
		sub := dirKey + e.seg + "/" // every key below starts with sub
		if w.skip != "" && strings.HasPrefix(sub, w.skip) {
			continue
		}
		if w.after > sub && !strings.HasPrefix(w.after, sub) {
			continue // every key below is less than after
		}
		if err := w.walk(path, sub, ""); err != nil {
			return err
		}
	}
	return nil
}

// object adds the key, stored in the file at path, to the page, or its
// common prefix if the delimiter groups it.
func (w *walker) object(key, path string) error {
	if w.delim != "" {
		if i := strings.Index(key[len(w.prefix):], w.delim); i >= 0 {
			cp := key[:len(w.prefix)+i+len(w.delim)]
			if w.n == w.max {
				return errFull
			}
			w.page.Prefixes = append(w.page.Prefixes, cp)
			w.n++
			w.skip, w.last = cp, "p"+cp
			return nil
		}
	}
	if w.n == w.max {
		return errFull
	}
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // deleted meanwhile
	}
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	t, err := readTrailer(f, fi.Size())
	if err != nil {
		return err
	}
	w.page.Objects = append(w.page.Objects, store.Object{Key: key, Size: t.Size, ETag: t.ETag, LastModified: fi.ModTime()})
	w.n++
	w.last = "k" + key
	return nil
}
