package store

import (
	"context"
	"iter"
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
