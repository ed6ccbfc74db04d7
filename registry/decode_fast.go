package registry

import (
	"github.com/opemu/opemu/kinds"
	"strings"

	"github.com/opemu/opemu/internal/jsonfast"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The shortcut of request decoding, on every create, update and patch: the usual body is read
// by jsonfast and vouched for without apimachinery's serializer, its strict JSON decoding and a
// round trip through ObjectMeta. It answers only "this is the object" (with a custom resource's
// unknown fields, which its schema's pruning reports as kube-apiserver's does); anything else
// goes the general way (decodeGeneral in decode.go), which also words the errors.
// FuzzDecodeBody holds it to decodeGeneral.

// decodeFast decodes body, the JSON body of a create or update of bt, when it is the usual one:
// one JSON object naming the URL's kind (a built-in kind may leave its apiVersion and kind out),
// no field repeated, metadata that ObjectMeta holds as it is, and for a built-in kind nothing
// its Go type does not know (unless fieldValidation is Ignore: then it is dropped). A custom
// resource's unknown fields are pruned and returned, sorted. ok is false when it cannot vouch
// for the body.
func decodeFast(t Target, bt bodyType, body []byte, fieldValidation string) (obj map[string]any, unknown []string, ok bool) {
	v, dups, parsed := jsonfast.Parse(body)
	if !parsed || dups {
		return nil, nil, false
	}
	obj, isObject := v.(map[string]any)
	if !isObject || !numbersFit(obj) {
		return nil, nil, false
	}
	unknown, ok = vouch(t, bt, obj, fieldValidation)
	return obj, unknown, ok
}

// vouch reports whether obj, a decoded JSON object in which no field repeats, is an object of
// bt as decodeGeneral would decode it (see decodeFast), pruning its unknown fields and filling
// a built-in kind's apiVersion and kind. It may modify obj even when it cannot vouch for it.
func vouch(t Target, bt bodyType, obj map[string]any, fieldValidation string) (unknown []string, ok bool) {
	gvk, ok := typeMetaOf(obj)
	if !ok {
		return nil, false
	}
	if !bt.custom {
		if av, _ := obj["apiVersion"].(string); av != "" && av != bt.gvk.GroupVersion().String() {
			return nil, false // completed from the URL ("apps/"): the general way writes it out
		}
		gvk = gvkWithDefaults(gvk, bt.gvk)
	}
	if gvk != bt.gvk {
		return nil, false
	}
	if md, ok := obj["metadata"]; ok && md != nil {
		if _, isObject := md.(map[string]any); !isObject {
			return nil, false
		}
	}
	switch {
	case bt.custom:
		if md, ok := obj["metadata"]; ok && !metaKnown(md) {
			return nil, false
		}
		if t.Kind.Schema != nil {
			unknown = t.Kind.Schema.Prune(obj)
		}
		return unknown, true
	case bt.goType != nil:
		// The Go type's own unknown fields come in the order of the body, which only the
		// general way knows; a kind or a Scale served without a schema that prunes cannot say.
		if t.Kind.Schema == nil || t.Sub == "scale" || !kinds.Prunes(t.Kind.Schema) {
			return nil, false
		}
		if len(t.Kind.Schema.Prune(obj)) > 0 && fieldValidation != "Ignore" {
			return nil, false
		}
	}
	defaultTypeMeta(bt, obj)
	return nil, true
}

// typeMetaOf reads obj's apiVersion and kind as kube-apiserver's decoder reads them, when
// nothing makes that read fail or differ: each a string or absent (or null), no other member
// encoding/json's case-insensitive matching would take for them, an apiVersion of one "/" at
// most.
func typeMetaOf(obj map[string]any) (schema.GroupVersionKind, bool) {
	for k, v := range obj {
		switch {
		case k == "apiVersion" || k == "kind":
			if _, isString := v.(string); !isString && v != nil {
				return schema.GroupVersionKind{}, false
			}
		case len(k) == len("kind") && strings.EqualFold(k, "kind"), len(k) == len("apiVersion") && strings.EqualFold(k, "apiVersion"):
			return schema.GroupVersionKind{}, false
		}
	}
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionKind{}, false
	}
	return gv.WithKind(kind), true
}

// metaKnown reports whether md, an object's metadata, is read into ObjectMeta by its strict
// JSON decoding with no error and nothing unknown: the usual fields in their usual shapes.
// False means it may not be; the general way reads it into ObjectMeta.
func metaKnown(md any) bool {
	if md == nil {
		return true
	}
	m, ok := md.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range m {
		if v == nil {
			if !knownMetaField[k] {
				return false
			}
			continue
		}
		switch k {
		case "name", "generateName", "namespace", "selfLink", "uid", "resourceVersion":
			if _, ok := v.(string); !ok {
				return false
			}
		case "generation", "deletionGracePeriodSeconds":
			if _, ok := int64Of(v); !ok {
				return false
			}
		case "creationTimestamp", "deletionTimestamp":
			if !isTimestamp(v) {
				return false
			}
		case "labels", "annotations":
			l, ok := v.(map[string]any)
			if !ok {
				return false
			}
			for _, e := range l {
				if _, ok := e.(string); !ok && e != nil {
					return false
				}
			}
		case "finalizers":
			l, ok := v.([]any)
			if !ok {
				return false
			}
			for _, e := range l {
				if _, ok := e.(string); !ok && e != nil {
					return false
				}
			}
		case "managedFields":
			if !managedFieldsKnown(v) {
				return false
			}
		default: // ownerReferences, anything unknown: the general way
			return false
		}
	}
	return true
}

// managedFieldsKnown reports whether v is a list of ManagedFieldsEntry that strict decoding
// reads with no error and nothing unknown: objects of its fields alone, each a string (time a
// timestamp, fieldsV1 an object) or null. Every stored object has managedFields, so every
// patched document and every body a client read back and sends again carries them.
func managedFieldsKnown(v any) bool {
	l, ok := v.([]any)
	if !ok {
		return false
	}
	for _, e := range l {
		m, ok := e.(map[string]any)
		if !ok {
			return false
		}
		for k, f := range m {
			if f == nil {
				if !knownManagedFieldsField[k] {
					return false
				}
				continue
			}
			switch k {
			case "manager", "operation", "apiVersion", "fieldsType", "subresource":
				if _, ok := f.(string); !ok {
					return false
				}
			case "time":
				if !isTimestamp(f) {
					return false
				}
			case "fieldsV1":
				if _, ok := f.(map[string]any); !ok {
					return false
				}
			default:
				return false
			}
		}
	}
	return true
}

// knownManagedFieldsField are the fields of a ManagedFieldsEntry.
var knownManagedFieldsField = map[string]bool{
	"manager": true, "operation": true, "apiVersion": true, "time": true, "fieldsType": true, "fieldsV1": true, "subresource": true,
}

// knownMetaField are the ObjectMeta fields metaKnown takes null for.
var knownMetaField = map[string]bool{
	"name": true, "generateName": true, "namespace": true, "selfLink": true, "uid": true, "resourceVersion": true,
	"generation": true, "deletionGracePeriodSeconds": true, "creationTimestamp": true, "deletionTimestamp": true,
	"labels": true, "annotations": true, "finalizers": true, "ownerReferences": true, "managedFields": true,
}
