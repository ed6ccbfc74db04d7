package cache

import (
	"context"
	"strings"

	"github.com/opemu/opemu/internal/jsonfast"
)

// The store's half of the recorder's shortcut (DESIGN.md, "Shortcuts"; registry/create_fast.go
// is the other): Create for an object its writer encoded and indexed itself.

// Encoded is a new object its writer encoded itself, for Store.CreateEncoded: a writer that
// makes many objects of one fixed shape (the recorder's Events) builds their bytes directly
// instead of a decoded map for the store to encode and index.
type Encoded struct {
	// JSON is the object exactly as EncodeJSON would encode it (keys sorted, strings quoted by
	// AppendString), with metadata.resourceVersion RVPlaceholder and the final name,
	// namespace, uid and generation. The store copies it: the caller may reuse the buffer once
	// CreateEncoded returns.
	JSON []byte
	// VersionAt is where JSON's metadata.resourceVersion member begins (its quote), so the
	// store need not search for it; zero when the writer does not know (no member begins an
	// object). A wrong one is found wrong, and the store searches.
	VersionAt int
	// UID and Generation are metadata.uid and metadata.generation as JSON holds them.
	UID        string
	Generation int64
	// Fields are the object's selectable fields as name, value, name, value, ..., in any order
	// (what Config.SelectableFields gives for it). The store keeps the slice (sorted in
	// place): the caller must not use it after. The names must live as long as the store.
	Fields []string
	// An Encoded object has no labels, annotations, finalizers or deletionTimestamp.
}

// EncodeJSON encodes v as the store encodes objects: exactly as json.Marshal does
// (internal/jsonfast).
func EncodeJSON(v any) ([]byte, error) { return jsonfast.Marshal(v) }

// AppendString appends s as a JSON string exactly as EncodeJSON writes it, for writers that
// encode an object themselves.
func AppendString(b []byte, s string) []byte { return jsonfast.AppendString(b, s) }

// RVPlaceholder is the metadata.resourceVersion an Encoded object carries until the store gives
// it its version.
const RVPlaceholder = rvPlaceholder

// EncodedCreator is a store that can take an object already encoded (Store does; package etcd
// does not, and its writers fall back to Create).
type EncodedCreator interface {
	CreateEncoded(ctx context.Context, key Key, e Encoded, opts WriteOptions) (*Object, error)
}

var _ EncodedCreator = (*Store)(nil)

// CreateEncoded is Create for an object its writer encoded (see Encoded). There is no dry run.
func (s *Store) CreateEncoded(_ context.Context, key Key, e Encoded, opts WriteOptions) (*Object, error) {
	invalid := &Error{Err: ErrInvalid, Key: key, Message: "cannot store this encoded object"}
	if key.Name == "" || opts.DryRun {
		return nil, invalid
	}
	key = Key{Group: intern(key.Group), Resource: intern(key.Resource), Namespace: intern(key.Namespace), Name: strings.Clone(key.Name)}
	pre := &Object{key: key, raw: e.JSON, uid: e.UID, generation: e.Generation}
	if e.VersionAt > 0 && e.VersionAt < len(e.JSON) {
		pre.rvAt = uint32(e.VersionAt + 1)
	}
	if len(e.Fields) > 0 {
		pairs(e.Fields).sort()
		pre.meta, pre.ends = e.Fields, [3]uint32{0, 0, uint32(len(e.Fields))}
	}
	return s.commitNew(key, pre, false, func(uint64) (*Object, error) {
		return nil, invalid // no placeholder, or more than one
	})
}
