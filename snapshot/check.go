package snapshot

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/crd"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Checker turns a snapshot into the objects a store restores (Objects). Store, Kinds and CRDs
// are the server's; the zero values of the others are documented.
type Checker struct {
	// Store encodes the objects of a file as it keeps objects (cache.Interface.Encode).
	Store cache.Interface
	// Kinds are the kinds the server serves; CRDs its CRDs (which are built in).
	Kinds *kinds.Registry
	CRDs  *crd.Registry
	// Now stamps the creationTimestamp an object of a file lacks. Nil means time.Now.
	Now func() time.Time
	// NewUID makes the uid an object of a file lacks. Nil means a random UUID v4.
	NewUID func() string
}

var crdGroupKind = schema.GroupKind{Group: crd.Resource.Group, Kind: "CustomResourceDefinition"}

// Objects returns what the store restores for s, but the objects skip names (nil: none):
//   - a snapshot taken from a store: its objects as they are (they passed the write path
//     when they were stored);
//   - a snapshot read from a file: each document checked as the write path checks what it
//     stores (registry.Check), its kind served by the server (a built-in kind, or a built-in
//     CRD's) or by a CRD of the snapshot (checked as a CRD create is), its namespace among the
//     snapshot's Namespaces or the system namespaces, its uid and creationTimestamp kept (from
//     UIDAnnotation too) or made when it has none, and its resourceVersion dropped; a kind's
//     create defaults apply to an object without status (written by hand: a Namespace's
//     phase, a Service's cluster IP).
//
// An object that cannot be restored is a 400 or 422 Status error naming it, and nothing is
// returned.
func (c Checker) Objects(s *Snapshot, skip func(cache.Key) bool) ([]*cache.Object, error) {
	if skip == nil {
		skip = func(cache.Key) bool { return false }
	}
	out := make([]*cache.Object, 0, s.Len())
	for _, o := range s.objects {
		if !skip(o.Key()) {
			out = append(out, o)
		}
	}
	if len(s.docs) == 0 {
		return out, nil
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewUID == nil {
		c.NewUID = uuid.NewString
	}
	// The kinds of the snapshot's CRDs, served aside: nothing the server serves changes until
	// the restore is checked whole.
	defined := kinds.New()
	crds, err := crd.New(crd.Config{Kinds: defined})
	if err != nil {
		return nil, err
	}
	namespaces := map[string]bool{}
	for _, ns := range registry.SystemNamespaces {
		namespaces[ns] = true
	}
	docs := make([]map[string]any, len(s.docs))
	for i, d := range s.docs {
		doc, err := copyJSON(d) // the snapshot's documents stay as read: it may be restored again
		if err != nil {
			return nil, err
		}
		docs[i] = doc
		switch kindOf(doc) {
		case "apiextensions.k8s.io/v1 CustomResourceDefinition":
			if err := c.defineCRD(crds, doc); err != nil {
				return nil, err
			}
		case "v1 Namespace":
			md, _ := doc["metadata"].(map[string]any)
			name, _ := md["name"].(string)
			namespaces[name] = true
		}
	}
	keys := make(map[cache.Key]bool, len(docs))
	var inNamespaces []cache.Key
	for _, doc := range docs {
		k, err := c.kindFor(defined, doc)
		if err != nil {
			return nil, err
		}
		key, err := c.stamp(k, doc)
		if err != nil {
			return nil, err
		}
		if err := registry.Check(registry.Target{Kind: k, Key: key}, doc); err != nil {
			return nil, err
		}
		if keys[key] {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("snapshot: %s %s is in the snapshot twice", k.Kind, describe(key)))
		}
		keys[key] = true
		if key.Namespace != "" {
			inNamespaces = append(inNamespaces, key)
		}
		if skip(key) {
			continue
		}
		o, err := c.Store.Encode(key, doc)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	for _, key := range inNamespaces {
		if !namespaces[key.Namespace] {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("snapshot: %s %s: its namespace %q is not in the snapshot (add a Namespace %s, as kube-apiserver refuses an object in a namespace that does not exist)",
				key.GroupResource(), describe(key), key.Namespace, key.Namespace))
		}
	}
	return out, nil
}

// defineCRD checks the CRD doc as a create of it is checked and serves its kinds in crds
// (aside from the server's); doc gets what the server stores for it (names defaulted,
// Established), its metadata kept. A built-in CRD is the server's own: it is stored as given.
func (c Checker) defineCRD(crds *crd.Registry, doc map[string]any) error {
	var def apiextv1.CustomResourceDefinition
	if err := remarshal(doc, &def); err != nil {
		return apierrors.NewBadRequest(fmt.Sprintf("snapshot: a CustomResourceDefinition: %v", err))
	}
	if c.CRDs.IsBuiltIn(def.Name) {
		return nil
	}
	spec := def.Spec
	if owner, ok := c.Kinds.Owner(spec.Group, spec.Names.Kind); ok && owner != def.Name && c.CRDs.IsBuiltIn(owner) {
		return apierrors.NewInvalid(crdGroupKind, def.Name, field.ErrorList{field.Invalid(field.NewPath("spec", "names", "kind"), spec.Names.Kind, "is already in use by "+owner)})
	}
	if k, ok := c.Kinds.Resource(cache.GroupResource{Group: spec.Group, Resource: spec.Names.Plural}); ok && k.CRDName != def.Name && c.CRDs.IsBuiltIn(k.CRDName) {
		return apierrors.NewInvalid(crdGroupKind, def.Name, field.ErrorList{field.Invalid(field.NewPath("spec", "names", "plural"), spec.Names.Plural, "is already in use by "+k.CRDName)})
	}
	stored, errs, err := crds.Register(&def)
	switch {
	case err != nil:
		return apierrors.NewBadRequest(fmt.Sprintf("snapshot: CustomResourceDefinition %q: %v", def.Name, err))
	case len(errs) > 0:
		return apierrors.NewInvalid(crdGroupKind, def.Name, errs)
	}
	md := doc["metadata"]
	clear(doc)
	if err := remarshal(stored, &doc); err != nil {
		return err
	}
	doc["metadata"] = md
	return nil
}

// kindFor is the kind doc is an object of: a kind of one of the snapshot's CRDs (defined), or
// one the server serves that is not a CRD's it has but the snapshot does not (a restore
// replaces every CRD).
func (c Checker) kindFor(defined *kinds.Registry, doc map[string]any) (*kinds.Kind, error) {
	av, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	if av == "" || kind == "" {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("snapshot: an object without apiVersion or kind (%s)", describeDoc(doc)))
	}
	k, ok := defined.ForKind(av, kind)
	if !ok || k.CRDName == "" {
		k, ok = c.Kinds.ForKind(av, kind)
		if ok && k.CRDName != "" && !c.CRDs.IsBuiltIn(k.CRDName) {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("snapshot: %s %s (%s) is a kind of the CustomResourceDefinition %s, which the snapshot does not hold",
				av, kind, describeDoc(doc), k.CRDName))
		}
	}
	switch {
	case !ok:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("snapshot: no kind %s %s is served, and no CustomResourceDefinition of the snapshot serves it (%s)", av, kind, describeDoc(doc)))
	case k.Conversion != nil:
		return nil, apierrors.NewBadRequest(fmt.Sprintf("snapshot: %s %s is a view of the stored %s: a snapshot holds those (%s)",
			av, kind, k.Conversion.Storage, describeDoc(doc)))
	}
	return k, nil
}

// stamp gives doc the metadata a restore keeps or makes (see Objects) and returns its key.
func (c Checker) stamp(k *kinds.Kind, doc map[string]any) (cache.Key, error) {
	md, ok := doc["metadata"].(map[string]any)
	if !ok {
		return cache.Key{}, apierrors.NewBadRequest(fmt.Sprintf("snapshot: %s without metadata", k.Kind))
	}
	name, _ := md["name"].(string)
	key := cache.Key{Group: k.Group, Resource: k.Plural, Name: name}
	if k.Namespaced {
		ns, _ := md["namespace"].(string)
		if ns == "" {
			ns = registry.DefaultNamespace // as kubectl apply puts it
			md["namespace"] = ns
		}
		key.Namespace = ns
	} else {
		delete(md, "namespace")
	}
	uid := uidOf(md)
	if uid == "" {
		uid = c.NewUID()
	}
	md["uid"] = uid
	if ann, ok := md["annotations"].(map[string]any); ok {
		delete(ann, UIDAnnotation)
		if len(ann) == 0 {
			delete(md, "annotations")
		}
	}
	delete(md, "resourceVersion")
	if ts, _ := md["creationTimestamp"].(string); ts == "" {
		md["creationTimestamp"] = c.Now().UTC().Format(time.RFC3339)
	}
	if _, ok := md["generation"]; !ok {
		md["generation"] = json.Number("1")
	}
	if _, ok := doc["status"]; !ok && k.PrepareForCreate != nil {
		k.PrepareForCreate(doc)
	}
	return key, nil
}

func kindOf(doc map[string]any) string {
	av, _ := doc["apiVersion"].(string)
	kind, _ := doc["kind"].(string)
	return av + " " + kind
}

func describe(key cache.Key) string {
	if key.Namespace == "" {
		return fmt.Sprintf("%q", key.Name)
	}
	return fmt.Sprintf("%q", key.Namespace+"/"+key.Name)
}

func describeDoc(doc map[string]any) string {
	md, _ := doc["metadata"].(map[string]any)
	name, _ := md["name"].(string)
	ns, _ := md["namespace"].(string)
	if ns != "" {
		name = ns + "/" + name
	}
	if name == "" {
		return "unnamed"
	}
	return fmt.Sprintf("%q", name)
}

// copyJSON returns a deep copy of a decoded JSON object.
func copyJSON(doc map[string]any) (map[string]any, error) {
	raw, err := cache.EncodeJSON(doc)
	if err != nil {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("snapshot: %v", err))
	}
	return cache.DecodeJSON(raw)
}

// remarshal converts between JSON shapes (a decoded object and a Go type).
func remarshal(from, to any) error {
	raw, err := json.Marshal(from)
	if err != nil {
		return err
	}
	if m, ok := to.(*map[string]any); ok {
		doc, err := cache.DecodeJSON(raw)
		if err != nil {
			return err
		}
		for k, v := range doc {
			(*m)[k] = v
		}
		return nil
	}
	return json.Unmarshal(raw, to)
}
