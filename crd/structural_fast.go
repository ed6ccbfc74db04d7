package crd

import (
	"sort"
	"strconv"
	"strings"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apimachinery/pkg/runtime"
)

// node is a structural schema compiled for walking objects: apiextensions' pruning and
// defaulting (pkg/apiserver/schema/pruning and defaulting) take the properties of a
// Structural by value, copying each (some 200 bytes) onto the heap for every field of every
// object written, which cost a create of an Application 13 KB and ten times the time of the
// rest of its schema work (docs/PERFORMANCE.md, "CRDs by apiextensions-apiserver's code").
// The walks below do what those functions do, step for step, over nodes that hold their
// properties as pointers; FuzzPruneDefault holds them to apiextensions' functions.
type node struct {
	props map[string]*node
	// additional is AdditionalProperties.Structural (nil: none, or no schema); hasAdditional
	// says AdditionalProperties is set at all.
	additional    *node
	hasAdditional bool
	items         *node
	preserve      bool // x-kubernetes-preserve-unknown-fields
	embedded      bool // x-kubernetes-embedded-resource
	nullable      bool
	def           any // Default.Object: nil when there is none
}

// compileNode compiles s (nil gives nil).
func compileNode(s *structuralschema.Structural) *node {
	if s == nil {
		return nil
	}
	n := &node{
		items:    compileNode(s.Items),
		preserve: s.XPreserveUnknownFields,
		embedded: s.XEmbeddedResource,
		nullable: s.Nullable,
		def:      s.Default.Object,
	}
	if len(s.Properties) > 0 {
		n.props = make(map[string]*node, len(s.Properties))
		for k, p := range s.Properties {
			n.props[k] = compileNode(&p)
		}
	}
	if s.AdditionalProperties != nil {
		n.hasAdditional = true
		n.additional = compileNode(s.AdditionalProperties.Structural)
	}
	return n
}

// metaFields are the fields pruning leaves to an embedded resource's own handling.
var metaFields = map[string]bool{"apiVersion": true, "kind": true, "metadata": true}

// frame is one step of the path to the value pruning is at: a key, or an index.
type frame struct {
	key     string
	index   int
	isIndex bool
}

// pruneRoot prunes obj, a whole object, by n (the resource's root: its apiVersion, kind and
// metadata are kept) and returns the paths of the fields removed, sorted
// (pruning.PruneWithOptions with TrackUnknownFieldPaths).
func pruneRoot(obj any, n *node) []string {
	root := node{}
	if n != nil {
		root = *n
	}
	root.embedded = true
	var frames [16]frame // deeper paths grow onto the heap
	var unknown []string
	prune(obj, &root, frames[:0], &unknown)
	sort.Strings(unknown)
	return unknown
}

// record adds the path of field k under path to unknown.
func record(path []frame, k string, unknown *[]string) {
	var b strings.Builder
	for i, f := range path {
		if f.isIndex {
			b.WriteByte('[')
			b.WriteString(strconv.Itoa(f.index))
			b.WriteByte(']')
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(f.key)
	}
	if len(path) > 0 {
		b.WriteByte('.')
	}
	b.WriteString(k)
	*unknown = append(*unknown, b.String())
}

func prune(x any, n *node, path []frame, unknown *[]string) {
	if n != nil && n.preserve {
		skipPrune(x, n, path, unknown)
		return
	}
	switch x := x.(type) {
	case map[string]any:
		if n == nil {
			for k := range x {
				record(path, k, unknown)
				delete(x, k)
			}
			return
		}
		for k, v := range x {
			if n.embedded && metaFields[k] {
				continue
			}
			if prop, ok := n.props[k]; ok {
				prune(v, prop, append(path, frame{key: k}), unknown)
			} else if n.hasAdditional {
				prune(v, n.additional, append(path, frame{key: k}), unknown)
			} else {
				if !metaFields[k] || len(path) > 0 {
					record(path, k, unknown)
				}
				delete(x, k)
			}
		}
	case []any:
		var items *node
		if n != nil {
			items = n.items
		}
		for i, v := range x {
			prune(v, items, append(path, frame{index: i, isIndex: true}), unknown)
		}
	}
}

func skipPrune(x any, n *node, path []frame, unknown *[]string) {
	if n == nil {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			if n.embedded && metaFields[k] {
				continue
			}
			if prop, ok := n.props[k]; ok {
				prune(v, prop, append(path, frame{key: k}), unknown)
			} else if n.hasAdditional {
				prune(v, n.additional, append(path, frame{key: k}), unknown)
			}
		}
	case []any:
		for i, v := range x {
			skipPrune(v, n.items, append(path, frame{index: i, isIndex: true}), unknown)
		}
	}
}

// field is the schema of x's field k (defaulting's getSchemaForField).
func (n *node) field(k string) *node {
	if n == nil {
		return nil
	}
	if prop, ok := n.props[k]; ok {
		return prop
	}
	return n.additional
}

// pruneNulls removes nulls n does not allow and will not default
// (defaulting.PruneNonNullableNullsWithoutDefaults).
func pruneNulls(x any, n *node) {
	switch x := x.(type) {
	case map[string]any:
		for k, v := range x {
			f := n.field(k)
			if v == nil && f != nil && !f.nullable && f.def == nil {
				delete(x, k)
			} else {
				pruneNulls(v, f)
			}
		}
	case []any:
		var items *node
		if n != nil {
			items = n.items
		}
		for _, v := range x {
			pruneNulls(v, items)
		}
	}
}

// nonNullableNull reports x is a null n does not allow.
func nonNullableNull(x any, n *node) bool { return x == nil && n != nil && !n.nullable }

// applyDefaults fills in n's defaults (defaulting.Default): a missing field, or a null its
// schema does not allow, gets a copy of its default.
func applyDefaults(x any, n *node) {
	if n == nil {
		return
	}
	switch x := x.(type) {
	case map[string]any:
		for k, prop := range n.props {
			if prop.def == nil {
				continue
			}
			if v, found := x[k]; !found || nonNullableNull(v, prop) {
				x[k] = runtime.DeepCopyJSONValue(prop.def)
			}
		}
		for k, v := range x {
			if prop, found := n.props[k]; found {
				applyDefaults(v, prop)
			} else if n.hasAdditional {
				if nonNullableNull(v, n.additional) {
					v = runtime.DeepCopyJSONValue(n.additional.def)
					x[k] = v
				}
				applyDefaults(v, n.additional)
			}
		}
	case []any:
		for i, v := range x {
			if nonNullableNull(v, n.items) {
				v = runtime.DeepCopyJSONValue(n.items.def)
				x[i] = v
			}
			applyDefaults(v, n.items)
		}
	}
}
