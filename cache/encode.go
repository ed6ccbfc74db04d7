package cache

import (
	"bytes"
	"encoding/json"
	"hash/maphash"
	"io"

	"k8s.io/apimachinery/pkg/fields"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// build encodes obj and indexes it. obj must already carry the final metadata.
func (s *Store) build(key Key, obj map[string]any) (*Object, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, &Error{Err: ErrInvalid, Key: key, Message: "cannot encode object: " + err.Error()}
	}
	md := metadataOf(obj)
	rv, _ := ParseResourceVersion(stringField(md, "resourceVersion"))
	o := &Object{
		key:         key,
		raw:         raw,
		uid:         stringField(md, "uid"),
		rv:          rv,
		generation:  int64Field(md, "generation"),
		labels:      stringMap(md["labels"]),
		annotations: stringMap(md["annotations"]),
		finalizers:  stringSlice(md["finalizers"]),
		deleting:    stringField(md, "deletionTimestamp") != "",
		specHash:    s.specHash(obj),
	}
	o.fields = fields.Set{"metadata.name": key.Name, "metadata.namespace": key.Namespace}
	if s.cfg.SelectableFields != nil {
		for k, v := range s.cfg.SelectableFields(key.GroupResource(), obj) {
			o.fields[k] = v
		}
	}
	return o, nil
}

// specHash hashes everything outside metadata and status: the part whose change bumps
// metadata.generation.
func (s *Store) specHash(obj map[string]any) uint64 {
	rest := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "metadata" && k != "status" && k != "apiVersion" && k != "kind" {
			rest[k] = v
		}
	}
	b, err := json.Marshal(rest)
	if err != nil {
		return 0
	}
	return maphash.Bytes(s.seed, b)
}

// FieldSelectable reports whether a field selector on gr may name label: metadata.name,
// metadata.namespace, or a field Config.SelectableFields gives for gr.
func (s *Store) FieldSelectable(gr GroupResource, label string) bool {
	if label == "metadata.name" || label == "metadata.namespace" {
		return true
	}
	if s.cfg.SelectableFields == nil {
		return false
	}
	_, ok := s.cfg.SelectableFields(gr, map[string]any{})[label]
	return ok
}
