package crd

import (
	"errors"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	// ErrBuiltIn is returned for an attempt to replace or delete the built-in Application CRD.
	ErrBuiltIn = errors.New("crd: built-in definition cannot be changed")
	// ErrNotFound is returned for an unknown CRD name.
	ErrNotFound = errors.New("crd: not found")
)

// Kind is one served version of a CRD: everything the server needs to serve and validate it.
// It is immutable once returned.
type Kind struct {
	Group, Version, Kind, ListKind, Plural, Singular string
	ShortNames, Categories                           []string
	Namespaced                                       bool
	StorageVersion                                   string
	CRDName                                          string
	StatusSubresource                                bool
	Scale                                            *apiextv1.CustomResourceSubresourceScale
	PrinterColumns                                   []apiextv1.CustomResourceColumnDefinition
	Schema                                           *apiextv1.JSONSchemaProps
	compiled                                         *compiledSchema
}

// GroupVersion returns "group/version" (just "version" for the core group).
func (k *Kind) GroupVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

type gvr struct{ group, version, plural string }
type grKey struct{ group, plural string }

// entry is one registered CRD with its kinds per served version.
type entry struct {
	crd     *apiextv1.CustomResourceDefinition
	kinds   []*Kind // served versions, in spec order
	storage *Kind   // the storage version's Kind (served or not)
}

// Registry holds the registered CRDs. The zero value is not usable; call New.
type Registry struct {
	gen atomic.Uint64
	// mu guards the maps below.
	mu        sync.RWMutex
	byName    map[string]*entry
	byGVR     map[gvr]*Kind
	byGR      map[grKey]*Kind
	groupKind map[string]string // group+"/"+kind → CRD name, for conflict checks
}

// New returns a registry holding the built-in Application CRD.
func New() (*Registry, error) {
	r := &Registry{byName: map[string]*entry{}, byGVR: map[gvr]*Kind{}, byGR: map[grKey]*Kind{}, groupKind: map[string]string{}}
	if _, errs, err := r.register(ApplicationCRD(), true); err != nil || len(errs) > 0 {
		if err == nil {
			err = errs.ToAggregate()
		}
		return nil, err
	}
	return r, nil
}

// Generation increases on every Register and Unregister; the server derives OpenAPI hashes
// from it.
func (r *Registry) Generation() uint64 { return r.gen.Load() }

// Register validates crd, compiles each version's schema once and serves its kinds at once.
// It returns the stored copy (with Established and NamesAccepted conditions), or the field
// errors that make crd invalid. Registering an existing name replaces it, except the built-in
// Application CRD (ErrBuiltIn).
func (r *Registry) Register(crd *apiextv1.CustomResourceDefinition) (*apiextv1.CustomResourceDefinition, field.ErrorList, error) {
	if crd.Name == ApplicationCRDName {
		return nil, nil, ErrBuiltIn
	}
	return r.register(crd.DeepCopy(), false)
}

func (r *Registry) register(crd *apiextv1.CustomResourceDefinition, builtin bool) (*apiextv1.CustomResourceDefinition, field.ErrorList, error) {
	fillDefaults(crd)
	if errs := validateCRD(crd); len(errs) > 0 {
		return nil, errs, nil
	}
	e := &entry{crd: crd}
	var errs field.ErrorList
	for i, v := range crd.Spec.Versions {
		k := &Kind{
			Group: crd.Spec.Group, Version: v.Name, Kind: crd.Spec.Names.Kind, ListKind: crd.Spec.Names.ListKind,
			Plural: crd.Spec.Names.Plural, Singular: crd.Spec.Names.Singular,
			ShortNames: crd.Spec.Names.ShortNames, Categories: crd.Spec.Names.Categories,
			Namespaced: crd.Spec.Scope == apiextv1.NamespaceScoped, CRDName: crd.Name,
			Schema: v.Schema.OpenAPIV3Schema, PrinterColumns: v.AdditionalPrinterColumns,
		}
		if len(k.PrinterColumns) == 0 {
			k.PrinterColumns = []apiextv1.CustomResourceColumnDefinition{{Name: "Age", Type: "date", JSONPath: ".metadata.creationTimestamp"}}
		}
		if v.Subresources != nil {
			k.StatusSubresource = v.Subresources.Status != nil
			k.Scale = v.Subresources.Scale
		}
		c, err := compile(k.Schema)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "versions").Index(i).Child("schema", "openAPIV3Schema"), "", err.Error()))
			continue
		}
		k.compiled = c
		if v.Storage {
			e.storage = k
		}
		if v.Served {
			e.kinds = append(e.kinds, k)
		}
	}
	if len(errs) > 0 {
		return nil, errs, nil
	}
	for _, k := range e.kinds {
		k.StorageVersion = e.storage.Version
	}
	e.storage.StorageVersion = e.storage.Version

	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.byName[crd.Name]; ok && builtin == false && old.crd.Name == ApplicationCRDName {
		return nil, nil, ErrBuiltIn
	}
	gk := crd.Spec.Group + "/" + crd.Spec.Names.Kind
	if owner, ok := r.groupKind[gk]; ok && owner != crd.Name {
		return nil, field.ErrorList{field.Invalid(field.NewPath("spec", "names", "kind"), crd.Spec.Names.Kind, "is already in use by "+owner)}, nil
	}
	if k, ok := r.byGR[grKey{crd.Spec.Group, crd.Spec.Names.Plural}]; ok && k.CRDName != crd.Name {
		return nil, field.ErrorList{field.Invalid(field.NewPath("spec", "names", "plural"), crd.Spec.Names.Plural, "is already in use by "+k.CRDName)}, nil
	}
	r.removeLocked(crd.Name)
	setConditions(crd)
	r.byName[crd.Name] = e
	r.groupKind[gk] = crd.Name
	r.byGR[grKey{crd.Spec.Group, crd.Spec.Names.Plural}] = e.storage
	for _, k := range e.kinds {
		r.byGVR[gvr{k.Group, k.Version, k.Plural}] = k
	}
	r.gen.Add(1)
	return crd.DeepCopy(), nil, nil
}

// Unregister removes the CRD name and stops serving its kinds.
func (r *Registry) Unregister(name string) error {
	if name == ApplicationCRDName {
		return ErrBuiltIn
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.byName[name]; !ok {
		return ErrNotFound
	}
	r.removeLocked(name)
	r.gen.Add(1)
	return nil
}

func (r *Registry) removeLocked(name string) {
	e, ok := r.byName[name]
	if !ok {
		return
	}
	delete(r.byName, name)
	delete(r.groupKind, e.crd.Spec.Group+"/"+e.crd.Spec.Names.Kind)
	delete(r.byGR, grKey{e.crd.Spec.Group, e.crd.Spec.Names.Plural})
	for _, k := range e.kinds {
		delete(r.byGVR, gvr{k.Group, k.Version, k.Plural})
	}
}

// Lookup returns the kind served at group/version/plural.
func (r *Registry) Lookup(group, version, plural string) (*Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.byGVR[gvr{group, version, plural}]
	return k, ok
}

// LookupResource returns the storage version's kind of group/plural.
func (r *Registry) LookupResource(group, plural string) (*Kind, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	k, ok := r.byGR[grKey{group, plural}]
	return k, ok
}

// Kinds returns every served kind, sorted by group, version and plural.
func (r *Registry) Kinds() []*Kind {
	r.mu.RLock()
	out := make([]*Kind, 0, len(r.byGVR))
	for _, k := range r.byGVR {
		out = append(out, k)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Plural < b.Plural
	})
	return out
}

// CRD returns a copy of the CRD name.
func (r *Registry) CRD(name string) (*apiextv1.CustomResourceDefinition, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, ok := r.byName[name]
	if !ok {
		return nil, false
	}
	return e.crd.DeepCopy(), true
}

// CRDs returns copies of every CRD, sorted by name.
func (r *Registry) CRDs() []*apiextv1.CustomResourceDefinition {
	r.mu.RLock()
	out := make([]*apiextv1.CustomResourceDefinition, 0, len(r.byName))
	for _, e := range r.byName {
		out = append(out, e.crd.DeepCopy())
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// fillDefaults sets the names Kubernetes derives: singular, listKind, apiVersion and kind.
func fillDefaults(crd *apiextv1.CustomResourceDefinition) {
	crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
	n := &crd.Spec.Names
	if n.Singular == "" {
		n.Singular = strings.ToLower(n.Kind)
	}
	if n.ListKind == "" && n.Kind != "" {
		n.ListKind = n.Kind + "List"
	}
}

// setConditions marks crd Established and NamesAccepted, as the apiserver does once it serves it.
func setConditions(crd *apiextv1.CustomResourceDefinition) {
	now := metav1.Now()
	crd.Status.AcceptedNames = crd.Spec.Names
	crd.Status.Conditions = []apiextv1.CustomResourceDefinitionCondition{
		{Type: apiextv1.NamesAccepted, Status: apiextv1.ConditionTrue, Reason: "NoConflicts", Message: "no conflicts found", LastTransitionTime: now},
		{Type: apiextv1.Established, Status: apiextv1.ConditionTrue, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted", LastTransitionTime: now},
	}
	crd.Status.StoredVersions = nil
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			crd.Status.StoredVersions = []string{v.Name}
		}
	}
}

// validateCRD checks what serving crd needs: names, scope, versions and schemas.
func validateCRD(crd *apiextv1.CustomResourceDefinition) field.ErrorList {
	var errs field.ErrorList
	spec := field.NewPath("spec")
	names := spec.Child("names")
	n := crd.Spec.Names
	if crd.Spec.Group == "" || !strings.Contains(crd.Spec.Group, ".") {
		errs = append(errs, field.Invalid(spec.Child("group"), crd.Spec.Group, "should be a domain with at least one dot"))
	} else if msgs := validation.IsDNS1123Subdomain(crd.Spec.Group); len(msgs) > 0 {
		errs = append(errs, field.Invalid(spec.Child("group"), crd.Spec.Group, strings.Join(msgs, "; ")))
	}
	if n.Plural == "" {
		errs = append(errs, field.Required(names.Child("plural"), ""))
	} else if msgs := validation.IsDNS1035Label(n.Plural); len(msgs) > 0 {
		errs = append(errs, field.Invalid(names.Child("plural"), n.Plural, strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1035Label(n.Singular); n.Singular != "" && len(msgs) > 0 {
		errs = append(errs, field.Invalid(names.Child("singular"), n.Singular, strings.Join(msgs, "; ")))
	}
	if n.Kind == "" {
		errs = append(errs, field.Required(names.Child("kind"), ""))
	}
	if want := n.Plural + "." + crd.Spec.Group; crd.Name != want {
		errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), crd.Name, "must be spec.names.plural+\".\"+spec.group ("+want+")"))
	}
	switch crd.Spec.Scope {
	case apiextv1.NamespaceScoped, apiextv1.ClusterScoped:
	default:
		errs = append(errs, field.NotSupported(spec.Child("scope"), crd.Spec.Scope, []string{string(apiextv1.NamespaceScoped), string(apiextv1.ClusterScoped)}))
	}
	versions := spec.Child("versions")
	if len(crd.Spec.Versions) == 0 {
		errs = append(errs, field.Required(versions, "must have exactly one version marked as storage version"))
	}
	storage, served := 0, 0
	seen := map[string]bool{}
	for i, v := range crd.Spec.Versions {
		p := versions.Index(i)
		if msgs := validation.IsDNS1035Label(v.Name); len(msgs) > 0 {
			errs = append(errs, field.Invalid(p.Child("name"), v.Name, strings.Join(msgs, "; ")))
		}
		if seen[v.Name] {
			errs = append(errs, field.Duplicate(p.Child("name"), v.Name))
		}
		seen[v.Name] = true
		if v.Storage {
			storage++
		}
		if v.Served {
			served++
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			errs = append(errs, field.Required(p.Child("schema", "openAPIV3Schema"), "schemas are required"))
		} else if v.Schema.OpenAPIV3Schema.Type != "object" {
			errs = append(errs, field.Invalid(p.Child("schema", "openAPIV3Schema", "type"), v.Schema.OpenAPIV3Schema.Type, "must be object at the root"))
		}
		if sc := v.Subresources; sc != nil && sc.Scale != nil {
			if !strings.HasPrefix(sc.Scale.SpecReplicasPath, ".spec.") {
				errs = append(errs, field.Invalid(p.Child("subresources", "scale", "specReplicasPath"), sc.Scale.SpecReplicasPath, "should be a json path under .spec"))
			}
			if !strings.HasPrefix(sc.Scale.StatusReplicasPath, ".status.") {
				errs = append(errs, field.Invalid(p.Child("subresources", "scale", "statusReplicasPath"), sc.Scale.StatusReplicasPath, "should be a json path under .status"))
			}
		}
	}
	if len(crd.Spec.Versions) > 0 && storage != 1 {
		errs = append(errs, field.Invalid(versions, storage, "must have exactly one version marked as storage version"))
	}
	if len(crd.Spec.Versions) > 0 && served == 0 {
		errs = append(errs, field.Invalid(versions, served, "must have at least one served version"))
	}
	return errs
}
