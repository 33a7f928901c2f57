package commit

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/commitptr/commitptr/generation"
)

// A commit replaces a set of the base generation's files with what it
// stages: all of them, or after ReplacePrefix only those under a prefix.
// The rules here judge a commit against that set, so that every caller
// (put, its dry run, rm) judges it the same way.

// ReplacePrefix makes the Tx replace only the base's files under prefix
// (a dataset path prefix ending in "/"): it keeps every other file of the
// base, removes those under prefix, and rebases within prefix (see
// Rebase.Scope), so that a concurrent commit outside it does not conflict.
// It returns the entries it removed and how many files it kept. Call it
// before staging.
func (tx *Tx) ReplacePrefix(ctx context.Context, prefix string) (map[string]generation.Entry, int, error) {
	if err := tx.EnableRebase(Rebase{Scope: prefix}); err != nil {
		return nil, 0, err
	}
	if err := tx.KeepAll(ctx); err != nil {
		return nil, 0, err
	}
	removed := map[string]generation.Entry{}
	kept := 0
	for _, e := range tx.Entries() {
		if strings.HasPrefix(e.Path, prefix) {
			removed[e.Path] = e
			tx.Remove(e.Path)
		} else {
			kept++
		}
	}
	tx.mu.Lock()
	tx.scope, tx.replaced = prefix, removed
	tx.mu.Unlock()
	return removed, kept, nil
}

// Replaced returns the base's files the Tx replaces, by path: those under
// the prefix of ReplacePrefix, or else all of them (reading the base
// manifest). It is empty for a first commit.
func (tx *Tx) Replaced(ctx context.Context) (map[string]generation.Entry, error) {
	tx.mu.Lock()
	scoped, replaced := tx.replaced != nil, tx.replaced
	tx.mu.Unlock()
	if err := tx.awaitBase(ctx); err != nil {
		return nil, err
	}
	if scoped || tx.base == nil {
		return replaced, nil
	}
	snap, err := tx.BaseSnapshot(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]generation.Entry, len(snap.Files()))
	for _, e := range snap.Files() {
		out[e.Path] = e
	}
	return out, nil
}

// Unchanged reports whether committing would publish the files it
// replaces as they are: every file staged in its scope is the base's file
// at its path (the same object, so a reuse, not an upload or a resume),
// with the same mode, the scope holds no other file, and the objects are
// all still in the store. The check uploads a missing or damaged object
// again (see VerifyReferences), and then the commit is a change that
// repairs the dataset. A file that PutFile uploaded before BeginAhead's
// read of the base, because it differed from the expected manifest, counts
// as the base's file if it has the same content and the base's object is
// there. A first commit is never unchanged. Call it after staging.
func (tx *Tx) Unchanged(ctx context.Context) (bool, error) {
	if err := tx.awaitBase(ctx); err != nil {
		return false, err
	}
	if tx.base == nil {
		return false, nil
	}
	replaced, err := tx.Replaced(ctx)
	if err != nil {
		return false, err
	}
	tx.mu.Lock()
	scope := tx.scope
	tx.mu.Unlock()
	n := 0
	// The base's entries whose content a file uploaded ahead of the base
	// read has: it was uploaded only because the expected manifest was not
	// the base.
	var same []generation.Entry
	for _, e := range tx.Entries() {
		if !strings.HasPrefix(e.Path, scope) {
			continue
		}
		n++
		old, ok := replaced[e.Path]
		if !ok || old.Mode != e.Mode {
			return false, nil
		}
		if old.Key != e.Key {
			if !tx.uploadedAhead(e.Path) || old.Size != e.Size || old.SHA256 != e.SHA256 {
				return false, nil
			}
			same = append(same, old)
		}
	}
	if n != len(replaced) {
		return false, nil
	}
	if err := tx.VerifyReferences(ctx); err != nil {
		return false, err
	}
	if tx.Repaired() > 0 {
		return false, nil
	}
	if len(same) == 0 {
		return true, nil
	}
	keys := make([]string, len(same))
	for i, e := range same {
		keys[i] = e.Key
	}
	stats, err := tx.d.statAll(ctx, keys)
	if err != nil {
		return false, fmt.Errorf("commit: verify referenced objects: %w", err)
	}
	for _, e := range same {
		if st, found := stats[e.Key]; unusable(e, st.size, found) != "" {
			return false, nil // the upload repairs the base
		}
	}
	return true, nil
}

// ErrTooManyDeletes is matched by a DeleteLimitError.
var ErrTooManyDeletes = errors.New("commit: too many files dropped")

// DeleteLimit bounds how many of the files a commit replaces it may drop:
// at most N, or with Percent at most N percent of them, rounded down.
type DeleteLimit struct {
	N       int
	Percent bool
}

// ParseDeleteLimit reads a limit written as a number of files ("10") or a
// percentage from 0% to 100% ("5%").
func ParseDeleteLimit(s string) (DeleteLimit, error) {
	num, percent := strings.CutSuffix(s, "%")
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || percent && n > 100 {
		return DeleteLimit{}, fmt.Errorf("delete limit %q: want a number of files, or a percentage from 0%% to 100%%", s)
	}
	return DeleteLimit{N: n, Percent: percent}, nil
}

// String writes the limit as ParseDeleteLimit reads it.
func (l DeleteLimit) String() string {
	if l.Percent {
		return strconv.Itoa(l.N) + "%"
	}
	return strconv.Itoa(l.N)
}

// Check refuses, with a DeleteLimitError, a commit of paths that would
// drop more of the replaced files than the limit allows.
func (l DeleteLimit) Check(replaced map[string]generation.Entry, paths []string) error {
	kept := map[string]bool{}
	for _, p := range paths {
		if _, ok := replaced[p]; ok {
			kept[p] = true
		}
	}
	dropped := len(replaced) - len(kept)
	limit := l.N
	if l.Percent {
		limit = len(replaced) * l.N / 100
	}
	if dropped > limit {
		return &DeleteLimitError{Dropped: dropped, Replaced: len(replaced), Limit: l}
	}
	return nil
}

// DeleteLimitError says that a commit would drop Dropped of the Replaced
// files, more than Limit allows.
type DeleteLimitError struct {
	Dropped, Replaced int
	Limit             DeleteLimit
}

func (e *DeleteLimitError) Error() string {
	return fmt.Sprintf("commit: it would drop %d of the %d files it replaces, more than the limit of %s allows", e.Dropped, e.Replaced, e.Limit)
}

// Is reports that the error matches ErrTooManyDeletes.
func (e *DeleteLimitError) Is(target error) bool { return target == ErrTooManyDeletes }
