package commit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/commitptr/commitptr/generation"
	"github.com/commitptr/commitptr/pointer"
	"github.com/commitptr/commitptr/store"
)

// TagDir is the key prefix of tags.
const TagDir = "_tag/"

// TagRefPrefix marks a tag in the refs OpenAt takes: "tag:NAME".
const TagRefPrefix = "tag:"

// ErrTagExists: a tag of that name exists and the call did not ask to move
// it.
var ErrTagExists = errors.New("commit: tag exists")

// maxTagBody bounds the tag body a reader accepts.
const maxTagBody = 64 << 10

var tagName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// ValidTagName checks a tag name: 1 to 128 letters, digits, '.', '_' or
// '-', starting with a letter or digit.
func ValidTagName(name string) error {
	if !tagName.MatchString(name) {
		return fmt.Errorf("commit: bad tag name %q: use 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// Tag is a named, durable reference to a generation, stored at _tag/NAME.
// The collector keeps a tagged generation like a pin without a TTL. Its
// body records the generation's seq and manifest with its sha256, so that
// the generation can be opened and verified whatever became of the chain.
type Tag struct {
	Name           string    `json:"name"`
	Generation     string    `json:"generation"`
	Seq            uint64    `json:"seq"`
	Manifest       string    `json:"manifest"`
	ManifestSHA256 string    `json:"manifest_sha256"`
	CreatedAt      time.Time `json:"created_at"`
	// WriteID is unique per write, so that every tag body, and so its
	// ETag, differs and a moved tag can be compared-and-swapped safely.
	WriteID string `json:"write_id"`
}

// TagKey returns the key of the tag name.
func TagKey(name string) string { return TagDir + name }

// Tag names the snapshot's generation name. A tag that exists is refused
// with ErrTagExists unless force is set; force moves it with a
// compare-and-swap against the body it read, so a concurrent change of the
// tag is never overwritten unseen.
//
// Like Pin, Tag then reads the pointer: if the collector's floor has passed
// the snapshot's seq and no other live pin or tag holds the generation,
// the new tag is removed again and Tag returns ErrCollected.
func (s *Snapshot) Tag(ctx context.Context, name string, force bool) (*Tag, error) {
	if err := ValidTagName(name); err != nil {
		return nil, err
	}
	t := &Tag{Name: name, Generation: s.Generation(), Seq: s.Seq(), Manifest: generation.ManifestKey(s.Generation()),
		ManifestSHA256: s.sha, CreatedAt: time.Now().UTC(), WriteID: uuid.NewString()}
	body, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	opts := store.PutOptions{IfNoneMatch: true, Size: int64(len(body)), ContentType: "application/json"}
	if force {
		_, attrs, err := s.d.readTag(ctx, name)
		switch {
		case err == nil:
			opts.IfNoneMatch, opts.IfMatch = false, attrs.ETag
		case !errors.Is(err, store.ErrNotExist):
			return nil, err
		}
	}
	key := TagKey(name)
	w, err := s.d.s.Put(ctx, key, bytes.NewReader(body), opts)
	if err != nil {
		// A lost response retried by the SDK meets our own write: read back.
		got, attrs, rerr := s.d.readTag(context.WithoutCancel(ctx), name)
		switch {
		case rerr == nil && got.WriteID == t.WriteID:
			w = attrs
		case errors.Is(err, store.ErrPrecondition) && rerr == nil && !force:
			return nil, fmt.Errorf("%w: %q names seq %d (generation %s); move it with force", ErrTagExists, name, got.Seq, got.Generation)
		case errors.Is(err, store.ErrPrecondition) && !force:
			return nil, fmt.Errorf("%w: %q (reading it back: %v); move it with force", ErrTagExists, name, rerr)
		case errors.Is(err, store.ErrPrecondition):
			return nil, fmt.Errorf("commit: tag %q changed while it was being moved; try again: %w", name, err)
		default:
			return nil, fmt.Errorf("commit: write tag %q: %w", name, err)
		}
	}
	cur, attrs, err := pointer.Read(ctx, s.d.s)
	if err == nil && s.Seq() < cur.GCFloor {
		var held bool
		if held, err = s.d.heldElsewhere(ctx, t.Generation, key, attrs.ServerTime); err == nil && !held {
			err = fmt.Errorf("%w: seq %d is below the collector's floor %d and no other live pin or tag holds it", ErrCollected, s.Seq(), cur.GCFloor)
		}
	}
	if err != nil {
		s.d.s.Delete(context.WithoutCancel(ctx), key, store.DeleteOptions{IfMatch: w.ETag}) //nolint:errcheck // best effort; a leftover tag only keeps data
		return nil, fmt.Errorf("commit: tag %q: %w", name, err)
	}
	return t, nil
}

// DeleteTag removes the tag name. A tag that is already gone matches
// ErrNotFound.
func (d *Dataset) DeleteTag(ctx context.Context, name string) error {
	if err := ValidTagName(name); err != nil {
		return err
	}
	if _, err := d.s.Head(ctx, TagKey(name)); errors.Is(err, store.ErrNotExist) {
		return fmt.Errorf("%w: no tag %q", ErrNotFound, name)
	} else if err != nil {
		return fmt.Errorf("commit: read tag %q: %w", name, err)
	}
	return d.s.Delete(ctx, TagKey(name), store.DeleteOptions{})
}

// Tags returns the dataset's tags, sorted by name: one LIST of _tag/ and
// one GET per tag.
func (d *Dataset) Tags(ctx context.Context) ([]*Tag, error) {
	var tags []*Tag
	for o, err := range store.List(ctx, d.s, TagDir, "", "") {
		if err != nil {
			return nil, fmt.Errorf("commit: list tags: %w", err)
		}
		name := strings.TrimPrefix(o.Key, TagDir)
		if ValidTagName(name) != nil {
			continue // not a tag; the collector ignores it too
		}
		t, _, err := d.readTag(ctx, name)
		if errors.Is(err, store.ErrNotExist) {
			continue // deleted since the listing
		}
		if err != nil {
			return nil, err
		}
		tags = append(tags, t)
	}
	slices.SortFunc(tags, func(a, b *Tag) int { return strings.Compare(a.Name, b.Name) })
	return tags, nil
}

// ReadTag reads the tag name; a missing tag matches ErrNotFound.
func (d *Dataset) ReadTag(ctx context.Context, name string) (*Tag, error) {
	if err := ValidTagName(name); err != nil {
		return nil, err
	}
	t, _, err := d.readTag(ctx, name)
	if errors.Is(err, store.ErrNotExist) {
		return nil, fmt.Errorf("%w: no tag %q", ErrNotFound, name)
	}
	return t, err
}

// readTag reads and decodes the tag name; a missing tag matches
// store.ErrNotExist.
func (d *Dataset) readTag(ctx context.Context, name string) (*Tag, store.Attrs, error) {
	key := TagKey(name)
	rc, attrs, err := d.s.Get(ctx, key)
	if err != nil {
		return nil, attrs, fmt.Errorf("commit: read tag %q: %w", key, err)
	}
	defer rc.Close()
	raw, err := io.ReadAll(io.LimitReader(rc, maxTagBody+1))
	if err != nil {
		return nil, attrs, fmt.Errorf("commit: read tag %q: %w", key, err)
	}
	var t Tag
	if len(raw) > maxTagBody {
		return nil, attrs, fmt.Errorf("%w: tag %q is larger than %d bytes", generation.ErrCorrupt, key, maxTagBody)
	}
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, attrs, fmt.Errorf("%w: tag %q: %v", generation.ErrCorrupt, key, err)
	}
	if t.Name != name || generation.Valid(t.Generation) != nil {
		return nil, attrs, fmt.Errorf("%w: tag %q names %q, generation %q", generation.ErrCorrupt, key, t.Name, t.Generation)
	}
	return &t, attrs, nil
}

// openTag opens the generation the tag name names: one GET of the tag and
// one of the manifest, checked against the sha256 the tag recorded.
func (d *Dataset) openTag(ctx context.Context, cur *pointer.Pointer, name string) (*Snapshot, error) {
	t, err := d.ReadTag(ctx, name)
	if err != nil {
		return nil, err
	}
	m, err := d.loadManifest(ctx, t.Generation, t.ManifestSHA256)
	if err == nil && m.Seq != t.Seq {
		err = fmt.Errorf("%w: manifest of generation %s has seq %d, tag %q says %d", generation.ErrCorrupt, t.Generation, m.Seq, name, t.Seq)
	}
	if err != nil {
		return nil, fmt.Errorf("commit: tag %q names generation %s: %w", name, t.Generation, err)
	}
	return &Snapshot{d: d, Pointer: cur, Manifest: m, sha: t.ManifestSHA256}, nil
}

// TaggedGenerations returns how many tags name each generation: one LIST
// of _tag/ and one GET per tag. The collector keeps these generations.
func TaggedGenerations(ctx context.Context, s store.Store) (map[string]int, error) {
	d := &Dataset{s: s}
	tags, err := d.Tags(ctx)
	if err != nil {
		return nil, err
	}
	n := map[string]int{}
	for _, t := range tags {
		n[t.Generation]++
	}
	return n, nil
}
