package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// maxCorrections bounds how often one plan is corrected (see correct)
// after its compare-and-swap lost to a pointer write, before the run
// plans again from scratch.
const maxCorrections = 16

// correct brings the plan up to date with the pointer as it is now, after
// its horizon/floor CAS found the pointer changed. The horizon and floor
// only move forward and say nothing about what a commit contains, so the
// plan stays valid against the newer pointer once it gives up what the
// generations committed in between need: each of them is kept, and every
// key its manifest references is taken out of the deletions. That is what
// a new plan would do too, except that it keeps the plan's retention
// window as it was (a little more than a new plan would keep) and needs no
// new listing. The caller retries its CAS at once against the pointer read
// here, so the window for the next commit is one round trip.
//
// correct reads the new generations' manifests along the chain from the
// new pointer down to the plan's, verifying each link as the walk does. It
// returns false, and no error, when the chain does not lead back to the
// plan's pointer: then the caller plans again.
func (r *runner) correct(ctx context.Context, p *plan) (bool, error) {
	ptr, attrs, err := r.readPointer(ctx)
	if err != nil {
		return false, refuse(fmt.Errorf("read %s: %w", pointer.Key, err))
	}
	if err := store.CheckServerTime(attrs.ServerTime, store.OpGet, pointer.Key, "grace, pin and orphan ages"); err != nil {
		return false, refuse(err)
	}
	if err := r.fenced(ptr); err != nil {
		return false, err
	}
	added, err := r.committedSince(ctx, p.ptr, ptr)
	if err != nil || added == nil {
		return false, err
	}
	for _, mi := range added {
		p.admit(mi, r.gens)
	}
	p.ptr, p.etag, p.committedAt = ptr, attrs.ETag, ptr.CommittedAtServer(attrs.LastModified)
	p.decideHorizon()
	return true, nil
}

// committedSince returns the manifests of the generations committed after
// old up to cur, newest first: an empty slice when cur names old's
// generation (a pointer write that committed nothing), nil when the chain
// from cur does not lead back to old.
func (r *runner) committedSince(ctx context.Context, old, cur *pointer.Pointer) ([]*manifestInfo, error) {
	if cur.Seq <= old.Seq {
		if cur.Seq == old.Seq && cur.Generation == old.Generation && cur.ManifestSHA256 == old.ManifestSHA256 {
			return []*manifestInfo{}, nil
		}
		return nil, nil
	}
	mi, err := r.manifest(ctx, cur.Generation, cur.ManifestSHA256, pointer.Key)
	if err != nil {
		return nil, refuse(err)
	}
	if mi.m.Seq != cur.Seq || mi.m.Parent != cur.Parent {
		return nil, refuse(fmt.Errorf("%w: %s has seq %d and parent %q, the manifest of generation %s has seq %d and parent %q",
			generation.ErrCorrupt, pointer.Key, cur.Seq, cur.Parent, cur.Generation, mi.m.Seq, mi.m.Parent))
	}
	added := []*manifestInfo{mi}
	for child := mi.m; child.Seq > old.Seq+1; child = mi.m {
		if mi, err = r.manifest(ctx, child.Parent, child.ParentManifestSHA256, "its child "+child.Generation); err != nil {
			if errors.Is(err, store.ErrNotExist) {
				return nil, nil // not what was committed on top of old
			}
			return nil, refuse(err)
		}
		if mi.m.Seq+1 != child.Seq {
			return nil, refuse(fmt.Errorf("%w: generation %s has seq %d, its child %s has seq %d",
				generation.ErrCorrupt, mi.m.Generation, mi.m.Seq, child.Generation, child.Seq))
		}
		added = append(added, mi)
	}
	if last := added[len(added)-1].m; last.Parent != old.Generation || last.ParentManifestSHA256 != old.ManifestSHA256 {
		return nil, nil
	}
	return added, nil
}

// admit keeps the generation of mi, committed after the plan was made, and
// everything its manifest references.
func (p *plan) admit(mi *manifestInfo, l *listing) {
	refs := map[string]bool{}
	for _, k := range mi.m.Keys() {
		refs[k] = true
	}
	gen := mi.m.Generation
	info := GenInfo{Generation: gen, Seq: mi.m.Seq, Reason: "committed while the collector planned"}
	if g := l.gens[gen]; g != nil {
		info.Objects, info.Bytes = len(g.objs), g.bytes
	}
	p.kept = slices.DeleteFunc(p.kept, func(k GenInfo) bool { return k.Generation == gen })
	p.kept = append(p.kept, info)
	p.victims = slices.DeleteFunc(p.victims, func(v *victim) bool {
		if v.info.Generation == gen {
			return true
		}
		v.data = slices.DeleteFunc(v.data, func(o store.Object) bool { return refs[o.Key] })
		if v.manifest != nil && refs[v.manifest.Key] {
			v.manifest = nil
		}
		v.count()
		return v.objects() == 0
	})
	sortKept(p.kept)
}
