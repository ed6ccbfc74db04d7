package registry

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strconv"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Server-owned metadata (SPEC §2): uid, creationTimestamp, generation, deletionTimestamp. The
// server sets them; what a client sends for them is ignored on create and kept from the stored
// object on update.

func (s *Store) now() string { return s.at(s.cfg.Clock.Now()) }

// at is t as metadata times are written (RFC 3339, UTC, to the second).
func (s *Store) at(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// stampCreate sets what a create gives: name (when key has one: a name that is not a string
// is left for validation to refuse) and namespace from key, a new uid, creationTimestamp and
// generation 1, and no deletion.
func (s *Store) stampCreate(key cache.Key, md map[string]any) {
	if key.Name != "" {
		md["name"] = key.Name
	}
	if key.Namespace != "" {
		md["namespace"] = key.Namespace
	} else {
		delete(md, "namespace")
	}
	md["uid"] = s.cfg.NewUID()
	md["creationTimestamp"] = s.now()
	md["generation"] = json.Number("1") // a json.Number, as decoded: schema validation then copies nothing to normalize it
	delete(md, "resourceVersion")
	delete(md, "deletionTimestamp")
	delete(md, "deletionGracePeriodSeconds")
}

// keptOnUpdate are the metadata fields an update keeps from the stored object.
var keptOnUpdate = []string{"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"}

// stampUpdate makes next the next version of cur (decoded as old): the fields above are kept,
// generation moves when anything outside metadata and status changed (or the labels, for a
// kind whose strategy says so), and while the object is
// being deleted no finalizer may be added. It reports whether the update removes the object
// (the last finalizer of one being deleted went, and for a kind with spec.finalizers the last
// of those too: kube-apiserver's ShouldDeleteNamespaceDuringUpdate).
func stampUpdate(t Target, cur *cache.Object, old, next map[string]any) (removing bool, err error) {
	md, oldMD := metadataOf(next), metadataOf(old)
	for _, f := range keptOnUpdate {
		if v, ok := oldMD[f]; ok {
			md[f] = v
		} else {
			delete(md, f)
		}
	}
	gen := cur.Generation()
	if !cache.SameSpec(next, old) || t.Kind.LabelsGeneration && !reflect.DeepEqual(md["labels"], oldMD["labels"]) {
		gen++
	}
	md["generation"] = json.Number(strconv.FormatInt(gen, 10))
	finalizers := stringSlice(md["finalizers"])
	if !cur.Deleting() {
		return false, nil
	}
	// kube-apiserver checks the metadata of an update twice (rest.BeforeUpdate, then the
	// strategy's validation): the cause is given twice, the message once.
	if errs := apivalidation.ValidateNoNewFinalizers(finalizers, cur.Finalizers(), field.NewPath("metadata", "finalizers")); len(errs) > 0 {
		return false, apierrors.NewInvalid(t.groupKind(), t.Key.Name, append(errs, errs...))
	}
	if len(finalizers) > 0 {
		return false, nil
	}
	// As kube's ShouldDeleteDuringUpdate: an update removes an object whose finalizers it
	// removed, or one whose grace period is over; not a Pod whose graceful deletion runs.
	if grace, ok := oldMD["deletionGracePeriodSeconds"].(json.Number); len(cur.Finalizers()) == 0 && ok && grace.String() != "0" {
		return false, nil
	}
	return !t.Kind.Finalize || len(specFinalizers(next)) == 0, nil
}

// specFinalizers are the finalizers in obj's spec (a Namespace's, Kind.Finalize): an object
// being deleted is removed only once they are gone too.
func specFinalizers(obj map[string]any) []string {
	spec, _ := obj["spec"].(map[string]any)
	return stringSlice(spec["finalizers"])
}

// nameChars are the characters generateName appends (no vowels, no look-alikes).
const nameChars = "bcdfghjklmnpqrstvwxz2456789"

// generateName returns prefix plus 5 random characters, the prefix cut to 58 characters so the
// name fits a DNS label, as kube-apiserver's SimpleNameGenerator cuts it.
func generateName(prefix string) string {
	const maxPrefix = 63 - 5
	if len(prefix) > maxPrefix {
		prefix = prefix[:maxPrefix]
	}
	b := []byte(prefix)
	for range 5 {
		b = append(b, nameChars[rand.IntN(len(nameChars))])
	}
	return string(b)
}

// checkTypeMeta requires obj to be of k, as kube-apiserver's checks after decoding do: a custom
// resource of another kind or apiVersion is a 422 naming what it says it is (the
// apiextensions-apiserver's validation of its type), an object of a built-in kind the 400 its
// decoder gives an object of another type.
func checkTypeMeta(k *kinds.Kind, obj map[string]any) error {
	av, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	if av == k.GroupVersion() && kind == k.Kind {
		return nil
	}
	gv, _ := schema.ParseGroupVersion(av)
	if k.BuiltIn() {
		gvk := gv.WithKind(kind)
		return cannotHandle(gvk, k.Kind, wrongType(bodyTypeOf(Target{Kind: k}), gvk))
	}
	var errs field.ErrorList
	if kind != k.Kind {
		errs = append(errs, field.Invalid(field.NewPath("kind"), kind, "must be "+k.Kind))
	}
	if av != k.GroupVersion() {
		errs = append(errs, field.Invalid(field.NewPath("apiVersion"), av, "must be "+k.GroupVersion()))
	}
	md, _ := obj["metadata"].(map[string]any)
	return apierrors.NewInvalid(schema.GroupKind{Group: gv.Group, Kind: kind}, stringOf(md["name"]), errs)
}

// metadata returns obj's metadata, creating an empty one when absent; a metadata that is not
// an object is a 400.
func metadata(obj map[string]any) (map[string]any, error) {
	switch md := obj["metadata"].(type) {
	case map[string]any:
		return md, nil
	case nil:
		m := map[string]any{}
		obj["metadata"] = m
		return m, nil
	default:
		return nil, badRequest("metadata must be a JSON object, not %s", jsonKind(md))
	}
}

func (t Target) groupKind() schema.GroupKind {
	return schema.GroupKind{Group: t.Kind.Group, Kind: t.Kind.Kind}
}

func metadataOf(obj map[string]any) map[string]any {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		obj["metadata"] = md
	}
	return md
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

func stringSlice(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, e := range l {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func formatRV(rv uint64) string { return strconv.FormatUint(rv, 10) }

// deepCopy copies a decoded JSON value so the copy can be modified freely.
func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return deepCopy(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopyValue(e)
		}
		return out
	}
	return v
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}
