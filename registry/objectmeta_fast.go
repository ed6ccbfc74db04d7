package registry

import (
	"encoding/json"
	"strings"
	"time"
	"unicode"

	"github.com/opemu/opemu/kinds"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/types"
)

// Shortcuts of the metadata rules, on every write: reading an object's metadata without a JSON
// round trip into ObjectMeta (simpleObjectMeta, held by FuzzObjectMeta), and vouching for the
// usual metadata without apimachinery's ValidateObjectMeta and its regular expressions
// (metaQuicklyValid, held by FuzzMetaQuicklyValid). Each answers only "here it is" or "valid";
// anything else goes the general way (objectMetaOf, validate in admit.go), which also words
// the errors.

// simpleObjectMeta reads md when every field it holds is of the common shape; ok is false
// (and nothing is to be trusted) otherwise.
func simpleObjectMeta(md map[string]any) (meta metav1.ObjectMeta, ok bool) {
	for k, v := range md {
		switch k {
		case "name", "generateName", "namespace", "uid", "resourceVersion":
			s, isString := v.(string)
			if !isString {
				return meta, false
			}
			switch k {
			case "name":
				meta.Name = s
			case "generateName":
				meta.GenerateName = s
			case "namespace":
				meta.Namespace = s
			case "uid":
				meta.UID = types.UID(s)
			case "resourceVersion":
				meta.ResourceVersion = s
			}
		case "generation":
			switch n := v.(type) {
			case json.Number:
				g, err := n.Int64()
				if err != nil {
					return meta, false
				}
				meta.Generation = g
			case int64: // stamped by the write path itself
				meta.Generation = n
			default:
				return meta, false
			}
		case "creationTimestamp":
			s, isString := v.(string)
			if !isString {
				return meta, false
			}
			ts, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return meta, false
			}
			meta.CreationTimestamp = metav1.NewTime(ts.Local())
		case "labels", "annotations":
			m, isMap := v.(map[string]any)
			if !isMap {
				return meta, false
			}
			out := make(map[string]string, len(m))
			for mk, mv := range m {
				s, isString := mv.(string)
				if !isString {
					return meta, false
				}
				out[mk] = s
			}
			if k == "labels" {
				meta.Labels = out
			} else {
				meta.Annotations = out
			}
		case "finalizers":
			l, isList := v.([]any)
			if !isList {
				return meta, false
			}
			out := make([]string, len(l))
			for i, e := range l {
				s, isString := e.(string)
				if !isString {
					return meta, false
				}
				out[i] = s
			}
			meta.Finalizers = out
		default:
			return meta, false
		}
	}
	return meta, true
}

// metaQuicklyValid reports whether md (an object's metadata, of a namespaced kind or not)
// certainly passes ValidateObjectMeta as validate calls it: the usual fields in the usual
// shapes, checked without regular expressions or building an ObjectMeta. False means it may
// not, and validate asks apimachinery, which also words the errors. FuzzMetaQuicklyValid checks
// it never passes metadata apimachinery refuses.
func metaQuicklyValid(md map[string]any, namespaced bool) bool {
	name, _ := md["name"].(string)
	if name == "" || kinds.NameIsDNSSubdomain(name, false) != nil {
		return false
	}
	ns, _ := md["namespace"].(string)
	if namespaced != (ns != "") || namespaced && !kinds.DNSLabelValid(ns) {
		return false
	}
	for k, v := range md {
		switch k {
		case "name", "namespace":
		case "uid", "resourceVersion":
			if _, ok := v.(string); !ok {
				return false
			}
		case "generation":
			if g, ok := int64Of(v); !ok || g < 0 {
				return false
			}
		case "creationTimestamp":
			if !isTimestamp(v) {
				return false
			}
		case "labels", "annotations":
			m, ok := v.(map[string]any)
			if !ok {
				return false
			}
			size := 0
			for mk, mv := range m {
				s, ok := mv.(string)
				if !ok || !kinds.QualifiedNameValid(mk) {
					return false
				}
				if k == "labels" && !kinds.LabelValueValid(s) {
					return false
				}
				size += len(mk) + len(s)
			}
			if k == "annotations" && size > apivalidation.TotalAnnotationSizeLimitB {
				return false
			}
		case "managedFields":
			if !managedFieldsQuicklyValid(v) {
				return false
			}
		case "finalizers": // what a controller's object carries: read without a JSON round trip
			l, ok := v.([]any)
			if !ok {
				return false
			}
			fs := make([]string, len(l))
			for i, e := range l {
				if fs[i], ok = e.(string); !ok {
					return false
				}
			}
			if !kinds.FinalizersValid(fs) {
				return false
			}
		default: // generateName, ownerReferences, ...: apimachinery's
			return false
		}
	}
	return true
}

// managedFieldsQuicklyValid reports whether v, metadata.managedFields, certainly passes
// apimachinery's ValidateManagedFields once read into ObjectMeta: entries of the usual members
// in the usual shapes (what the field manager writes), an Apply or an Update, FieldsV1.
func managedFieldsQuicklyValid(v any) bool {
	entries, ok := v.([]any)
	if !ok {
		return false
	}
	for _, e := range entries {
		entry, ok := e.(map[string]any)
		if !ok {
			return false
		}
		for k, v := range entry {
			switch k {
			case "manager":
				s, ok := v.(string)
				if !ok || len(s) > metav1validation.FieldManagerMaxLength || strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0 {
					return false
				}
			case "operation":
				if v != string(metav1.ManagedFieldsOperationApply) && v != string(metav1.ManagedFieldsOperationUpdate) {
					return false
				}
			case "apiVersion":
				if _, ok := v.(string); !ok {
					return false
				}
			case "subresource":
				if s, ok := v.(string); !ok || len(s) > metav1validation.MaxSubresourceNameLength {
					return false
				}
			case "fieldsType":
				if v != "FieldsV1" {
					return false
				}
			case "fieldsV1":
				if _, ok := v.(map[string]any); !ok {
					return false
				}
			case "time":
				if !isTimestamp(v) {
					return false
				}
			default:
				return false
			}
		}
		if _, ok := entry["operation"]; !ok {
			return false
		}
	}
	return true
}

// int64Of is v as an int64 when it is a JSON integer (json.Number) that fits one.
func int64Of(v any) (int64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	i, err := n.Int64()
	return i, err == nil
}

// isTimestamp reports whether v is a string metav1.Time reads: RFC 3339.
func isTimestamp(v any) bool {
	s, ok := v.(string)
	if !ok {
		return false
	}
	_, err := time.Parse(time.RFC3339, s)
	return err == nil
}
