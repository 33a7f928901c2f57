package store

import (
	"context"
	"iter"
	"sort"
	"strings"
)

// List iterates over every object under prefix, in lexical order, paging
// through the store. With a delimiter, common prefixes are yielded as Objects
// whose Key ends with the delimiter and whose Size is -1. startAfter lists
// only keys lexically after it. Iteration stops at the first error, which is
// yielded once.
func List(ctx context.Context, s Store, prefix, delimiter, startAfter string) iter.Seq2[Object, error] {
	return func(yield func(Object, error) bool) {
		req := ListRequest{Prefix: prefix, Delimiter: delimiter, StartAfter: startAfter}
		for {
			page, err := s.List(ctx, req)
			if err != nil {
				yield(Object{}, err)
				return
			}
			for _, o := range merge(page) {
				if !yield(o, nil) {
					return
				}
			}
			if page.Next == "" {
				return
			}
			req.Token = page.Next
		}
	}
}

// merge interleaves a page's objects and common prefixes in key order.
func merge(p ListPage) []Object {
	if len(p.Prefixes) == 0 {
		return p.Objects
	}
	out := make([]Object, 0, len(p.Objects)+len(p.Prefixes))
	i, j := 0, 0
	for i < len(p.Objects) || j < len(p.Prefixes) {
		if j == len(p.Prefixes) || (i < len(p.Objects) && p.Objects[i].Key < p.Prefixes[j]) {
			out = append(out, p.Objects[i])
			i++
			continue
		}
		out = append(out, Object{Key: p.Prefixes[j], Size: -1})
		j++
	}
	return out
}

// Paginate cuts one listing page out of sorted keys that all carry req.Prefix.
// Drivers without a native listing share it. Its token is the last key
// returned, or the last common prefix marked with a trailing NUL byte, which
// no key contains.
func Paginate(sorted []string, entry func(key string) Object, req ListRequest) ListPage {
	limit := req.MaxKeys
	if limit <= 0 || limit > MaxListPage {
		limit = MaxListPage
	}
	after, skipUnder := req.StartAfter, ""
	if req.Token != "" {
		after = req.Token
		if p, ok := strings.CutSuffix(req.Token, "\x00"); ok {
			after, skipUnder = p, p
		}
	}
	var page ListPage
	var next string
	for i := sort.SearchStrings(sorted, after); i < len(sorted); i++ {
		k := sorted[i]
		if k <= after || (skipUnder != "" && strings.HasPrefix(k, skipUnder)) {
			continue
		}
		if len(page.Objects)+len(page.Prefixes) == limit {
			page.Next = next
			return page
		}
		if req.Delimiter != "" {
			rest := k[len(req.Prefix):]
			if j := strings.Index(rest, req.Delimiter); j >= 0 {
				p := req.Prefix + rest[:j+len(req.Delimiter)]
				page.Prefixes = append(page.Prefixes, p)
				skipUnder, next = p, p+"\x00"
				continue
			}
		}
		page.Objects = append(page.Objects, entry(k))
		next = k
	}
	return page
}
