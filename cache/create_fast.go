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

// EncodedCreator is a store that can take an object already encoded (Store and package etcd's
// store do; a writer holding another falls back to Create).
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
	pre := encodedObject(key, e, e.JSON)
	if e.VersionAt > 0 && e.VersionAt < len(e.JSON) {
		pre.rvAt = uint32(e.VersionAt + 1)
	}
	return s.commitNew(pre.key, pre, false, func(uint64) (*Object, error) {
		return nil, invalid // no placeholder, or more than one
	})
}

// encodedObject is e at key with raw for its encoding, indexed by its Fields, of version 0.
func encodedObject(key Key, e Encoded, raw []byte) *Object {
	key = Key{Group: intern(key.Group), Resource: intern(key.Resource), Namespace: intern(key.Namespace), Name: strings.Clone(key.Name)}
	o := &Object{key: key, raw: raw, uid: e.UID, generation: e.Generation}
	if len(e.Fields) > 0 {
		pairs(e.Fields).sort()
		o.meta, o.ends = e.Fields, [3]uint32{0, 0, uint32(len(e.Fields))}
	}
	return o
}

// EncodeEncoded is Encode for an object its writer encoded (see Encoded): the result has
// version 0 and no metadata.resourceVersion (e's placeholder member is cut out of a copy of
// e.JSON), so its Raw is the value to store, and AtVersion makes the object as held at the
// version the source gives the write. ErrInvalid when e.JSON holds no placeholder member, or
// more than one.
func (c *WatchCache) EncodeEncoded(key Key, e Encoded) (*Object, error) {
	at := e.VersionAt
	if at <= 0 || !hasVersionFieldAt(e.JSON, at, rvPlaceholder) {
		at = versionFieldAt(e.JSON, rvPlaceholder)
	}
	end := at + len(versionFieldPrefix) + len(rvPlaceholder) + 1
	switch {
	case at > 0 && e.JSON[at-1] == ',':
		at-- // the member and the comma before it
	case at >= 0 && end < len(e.JSON) && e.JSON[end] == ',':
		end++ // the member and the comma after it
	default:
		return nil, &Error{Err: ErrInvalid, Key: key, Message: "cannot store this encoded object"}
	}
	raw := make([]byte, 0, len(e.JSON)-(end-at))
	return encodedObject(key, e, append(append(raw, e.JSON[:at]...), e.JSON[end:]...)), nil
}
