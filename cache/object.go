package cache

import (
	"encoding/json"
	"slices"
	"strconv"

	"github.com/opemu/opemu/internal/jsonfast"
	"k8s.io/apimachinery/pkg/labels"
)

// GroupResource names a kind of stored object: its API group ("" for core) and plural resource.
// Watch history is kept per GroupResource, so churn in one resource never expires another's
// watchers.
type GroupResource struct {
	Group    string
	Resource string
}

func (gr GroupResource) String() string {
	if gr.Group == "" {
		return gr.Resource
	}
	return gr.Resource + "." + gr.Group
}

// Key identifies one object. Namespace is empty for cluster-scoped objects.
type Key struct {
	Group     string
	Resource  string
	Namespace string
	Name      string
}

// GroupResource returns the resource part of the key.
func (k Key) GroupResource() GroupResource { return GroupResource{k.Group, k.Resource} }

func (k Key) String() string {
	s := k.GroupResource().String() + " "
	if k.Namespace != "" {
		s += k.Namespace + "/"
	}
	return s + k.Name
}

// Object is one stored object: its encoded JSON, immutable and shared by every reader and
// watcher, plus the few decoded fields the store indexes. Never modify the bytes Raw returns;
// decode them (Decode) to get a private, mutable copy.
type Object struct {
	key        Key
	raw        []byte
	uid        string
	rv         uint64
	generation int64
	// meta is the indexed metadata in one slice, so a stored object is a few allocations for
	// the collector to scan, not one per part: the labels, annotations and selectable fields
	// (beyond metadata.name and metadata.namespace, which come from key) as pairs, then the
	// finalizers. ends[i] is where part i stops; nil when the object has none of them.
	meta []string
	ends [3]uint32
	// rvAt is 1 + where raw's metadata.resourceVersion member begins, when the store wrote it
	// there (withVersion), so restamping it needs no search; 0 when unknown.
	rvAt     uint32
	deleting bool
}

func (o *Object) labels() pairs      { return o.part(0, o.ends[0]) }
func (o *Object) annotations() pairs { return o.part(o.ends[0], o.ends[1]) }
func (o *Object) fields() pairs      { return o.part(o.ends[1], o.ends[2]) }

// part is meta[from:to], capacity-limited so nothing appends over the next part; nil when
// empty.
func (o *Object) part(from, to uint32) []string {
	if from == to {
		return nil
	}
	return o.meta[from:to:to]
}

// Key returns the object's key.
func (o *Object) Key() Key { return o.key }

// Raw returns the encoded JSON. The slice is shared: callers must not modify it.
func (o *Object) Raw() []byte { return o.raw }

// UID returns metadata.uid.
func (o *Object) UID() string { return o.uid }

// ResourceVersion returns metadata.resourceVersion as a number; 0 for a dry-run result.
func (o *Object) ResourceVersion() uint64 { return o.rv }

// Generation returns metadata.generation.
func (o *Object) Generation() int64 { return o.generation }

// Labels returns metadata.labels as a fresh map the caller owns.
func (o *Object) Labels() labels.Set { return o.labels().Map() }

// Annotations returns metadata.annotations as a fresh map the caller owns.
func (o *Object) Annotations() map[string]string { return o.annotations().Map() }

// Annotation returns one annotation's value, "" when absent.
func (o *Object) Annotation(key string) string { return o.annotations().Get(key) }

// SameLabelsAndAnnotations reports whether o and other carry the same labels and annotations.
func (o *Object) SameLabelsAndAnnotations(other *Object) bool {
	return slices.Equal(o.labels(), other.labels()) && slices.Equal(o.annotations(), other.annotations())
}

// Field returns a selectable field's value (metadata.name, metadata.namespace, or one the
// store's Config.SelectableFields adds), "" when absent.
func (o *Object) Field(name string) string { return objectFields{&o.key, o.fields()}.Get(name) }

// Finalizers returns metadata.finalizers. The slice is shared: callers must not modify it.
func (o *Object) Finalizers() []string { return o.part(o.ends[2], uint32(len(o.meta))) }

// Deleting reports whether metadata.deletionTimestamp is set.
func (o *Object) Deleting() bool { return o.deleting }

// Decode returns a fresh decoded copy of the object that the caller owns. Numbers decode as
// json.Number so integers survive exactly.
func (o *Object) Decode() (map[string]any, error) {
	return DecodeJSON(o.raw)
}

// DecodeJSON decodes a JSON object the way the store does (numbers as json.Number), with
// encoding/json's answer either way (internal/jsonfast).
func DecodeJSON(data []byte) (map[string]any, error) { return jsonfast.DecodeObject(data) }

// metadataOf returns obj["metadata"] as a map, creating it when missing or of the wrong type.
func metadataOf(obj map[string]any) map[string]any {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		obj["metadata"] = md
	}
	return md
}

func stringField(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// appendStrings appends the strings of a decoded JSON array to dst, interned; other values
// are skipped.
func appendStrings(dst []string, v any) []string {
	l, _ := v.([]any)
	for _, v := range l {
		if s, ok := v.(string); ok {
			dst = append(dst, intern(s))
		}
	}
	return dst
}

// int64Field reads an integer that may be a json.Number, float64 or int64.
func int64Field(m map[string]any, k string) int64 {
	switch v := m[k].(type) {
	case json.Number:
		n, _ := v.Int64()
		return n
	case float64:
		return int64(v)
	case int64:
		return v
	case int:
		return int64(v)
	}
	return 0
}

func formatRV(rv uint64) string { return strconv.FormatUint(rv, 10) }

// ParseResourceVersion parses a decimal resourceVersion. "" parses as 0.
func ParseResourceVersion(s string) (uint64, error) {
	if s == "" {
		return 0, nil
	}
	return strconv.ParseUint(s, 10, 64)
}
