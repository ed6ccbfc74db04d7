package crd

import (
	"context"
	"errors"
	"sort"
	"strings"
	"sync"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

var (
	// ErrBuiltIn is returned for an attempt to replace or delete a built-in CRD.
	ErrBuiltIn = errors.New("crd: built-in definition cannot be changed")
	// ErrNotFound is returned for an unknown CRD name.
	ErrNotFound = errors.New("crd: not found")
)

// Config configures a Registry. Kinds is required.
type Config struct {
	// Kinds is where the kinds of registered CRDs are served.
	Kinds *kinds.Registry
	// Drop removes every stored object of a resource and ends its watches, as deleting a CRD
	// does. Nil drops nothing (objects stay in the store, unserved).
	Drop func(ctx context.Context, gr cache.GroupResource) (int, error)
}

// entry is one registered CRD with its kinds per served version.
type entry struct {
	crd     *apiextv1.CustomResourceDefinition
	served  []*kinds.Kind // served versions, in spec order
	storage *kinds.Kind   // the storage version's Kind (served or not)
	builtIn bool
}

// Registry holds the registered CRDs and serves their kinds through a kinds.Registry. Create it
// with New; the zero value is not usable.
type Registry struct {
	cfg Config

	// mu guards byName. Registering takes it across the conflict check and kinds.Replace, so two
	// CRDs cannot take the same names.
	mu     sync.Mutex
	byName map[string]*entry
}

// New returns an empty registry.
func New(cfg Config) (*Registry, error) {
	if cfg.Kinds == nil {
		return nil, errors.New("crd: Kinds is required")
	}
	return &Registry{cfg: cfg, byName: map[string]*entry{}}, nil
}

// AddBuiltIn registers a CRD the server itself defines (the Application CRD): it is served
// like any other but cannot be replaced or deleted.
func (r *Registry) AddBuiltIn(c *apiextv1.CustomResourceDefinition) error {
	e, errs := prepare(c.DeepCopy(), true)
	if len(errs) > 0 {
		return errs.ToAggregate()
	}
	setConditions(e.crd)
	e.builtIn = true
	r.mu.Lock()
	defer r.mu.Unlock()
	if errs := r.conflictsLocked(e); len(errs) > 0 {
		return errs.ToAggregate()
	}
	r.installLocked(e)
	return nil
}

// Register validates c, compiles each version's schema once and serves its kinds at once. It
// returns the stored copy (names defaulted, Established and NamesAccepted), or the field errors
// that make c invalid. Registering an existing name replaces it, except a built-in CRD
// (ErrBuiltIn).
func (r *Registry) Register(c *apiextv1.CustomResourceDefinition) (*apiextv1.CustomResourceDefinition, field.ErrorList, error) {
	e, errs := prepare(c.DeepCopy(), false)
	if len(errs) > 0 {
		return nil, errs, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	old, ok := r.byName[e.crd.Name]
	if ok && old.builtIn {
		return nil, nil, ErrBuiltIn
	}
	if ok && rvOf(e.crd.ResourceVersion) != 0 && rvOf(e.crd.ResourceVersion) < rvOf(old.crd.ResourceVersion) {
		// An older state of a CRD already served at a newer one (replicas register what they
		// store and what they see others store, in either order).
		return old.crd.DeepCopy(), nil, nil
	}
	if errs := r.conflictsLocked(e); len(errs) > 0 {
		return nil, errs, nil
	}
	if len(e.crd.Status.Conditions) == 0 {
		setConditions(e.crd)
	}
	r.installLocked(e)
	return e.crd.DeepCopy(), nil, nil
}

// Check returns what Register would store for c, or its field errors, registering nothing.
func (r *Registry) Check(c *apiextv1.CustomResourceDefinition) (*apiextv1.CustomResourceDefinition, field.ErrorList, error) {
	e, errs := prepare(c.DeepCopy(), false)
	if len(errs) > 0 {
		return nil, errs, nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.byName[e.crd.Name]; ok && old.builtIn {
		return nil, nil, ErrBuiltIn
	}
	if errs := r.conflictsLocked(e); len(errs) > 0 {
		return nil, errs, nil
	}
	setConditions(e.crd)
	return e.crd, nil, nil
}

// Unregister removes the CRD name and stops serving its kinds.
func (r *Registry) Unregister(name string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byName[name]
	switch {
	case !ok:
		return ErrNotFound
	case e.builtIn:
		return ErrBuiltIn
	}
	delete(r.byName, name)
	r.cfg.Kinds.Remove(name)
	return nil
}

// IsBuiltIn reports whether name is a built-in CRD.
func (r *Registry) IsBuiltIn(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byName[name]
	return ok && e.builtIn
}

// BuiltIns returns copies of the built-in CRDs, sorted by name.
func (r *Registry) BuiltIns() []*apiextv1.CustomResourceDefinition {
	var out []*apiextv1.CustomResourceDefinition
	for _, c := range r.CRDs() {
		if r.IsBuiltIn(c.Name) {
			out = append(out, c)
		}
	}
	return out
}

// CRD returns a copy of the CRD name.
func (r *Registry) CRD(name string) (*apiextv1.CustomResourceDefinition, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.byName[name]
	if !ok {
		return nil, false
	}
	return e.crd.DeepCopy(), true
}

// CRDs returns copies of every CRD, sorted by name.
func (r *Registry) CRDs() []*apiextv1.CustomResourceDefinition {
	r.mu.Lock()
	out := make([]*apiextv1.CustomResourceDefinition, 0, len(r.byName))
	for _, e := range r.byName {
		out = append(out, e.crd.DeepCopy())
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// conflictsLocked checks that e takes no group/kind or resource another definition serves.
func (r *Registry) conflictsLocked(e *entry) field.ErrorList {
	spec := e.crd.Spec
	if owner, ok := r.cfg.Kinds.Owner(spec.Group, spec.Names.Kind); ok && owner != e.crd.Name {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "names", "kind"), spec.Names.Kind, "is already in use by "+ownerName(owner))}
	}
	if k, ok := r.cfg.Kinds.Resource(cache.GroupResource{Group: spec.Group, Resource: spec.Names.Plural}); ok && k.CRDName != e.crd.Name {
		return field.ErrorList{field.Invalid(field.NewPath("spec", "names", "plural"), spec.Names.Plural, "is already in use by "+ownerName(k.CRDName))}
	}
	return nil
}

func ownerName(crdName string) string {
	if crdName == "" {
		return "a built-in resource"
	}
	return crdName
}

func (r *Registry) installLocked(e *entry) {
	r.byName[e.crd.Name] = e
	r.cfg.Kinds.Replace(e.crd.Name, e.served, e.storage)
}

// prepare defaults c's names, validates it and compiles each version into a Kind.
func prepare(c *apiextv1.CustomResourceDefinition, builtIn bool) (*entry, field.ErrorList) {
	fillDefaults(c)
	if errs := validateCRD(c); len(errs) > 0 {
		return nil, errs
	}
	e := &entry{crd: c}
	var errs field.ErrorList
	for i, v := range c.Spec.Versions {
		k := &kinds.Kind{
			Group: c.Spec.Group, Version: v.Name, Kind: c.Spec.Names.Kind, ListKind: c.Spec.Names.ListKind,
			Plural: c.Spec.Names.Plural, Singular: c.Spec.Names.Singular,
			ShortNames: c.Spec.Names.ShortNames, Categories: c.Spec.Names.Categories,
			Namespaced: c.Spec.Scope == apiextv1.NamespaceScoped, CRDName: c.Name,
		}
		k.Columns = []kinds.Column{kinds.NameColumn}
		for _, pc := range v.AdditionalPrinterColumns {
			k.Columns = append(k.Columns, kinds.PrinterColumn(pc))
		}
		if len(k.Columns) == 1 {
			k.Columns = append(k.Columns, kinds.AgeColumn("Age"))
		}
		for _, sf := range v.SelectableFields {
			k.Fields = append(k.Fields, kinds.Field{Name: strings.TrimPrefix(sf.JSONPath, ".")})
		}
		if v.Subresources != nil {
			k.Status = v.Subresources.Status != nil
			k.Scale = v.Subresources.Scale
		}
		s, err := compile(v.Schema.OpenAPIV3Schema, builtIn)
		if err != nil {
			errs = append(errs, field.Invalid(field.NewPath("spec", "versions").Index(i).Child("schema", "openAPIV3Schema"), "", err.Error()))
			continue
		}
		k.Schema = s
		if v.Storage {
			e.storage = k
		}
		if v.Served {
			e.served = append(e.served, k)
		}
	}
	if len(errs) > 0 {
		return nil, errs
	}
	for _, k := range e.served {
		k.StorageVersion = e.storage.Version
	}
	e.storage.StorageVersion = e.storage.Version
	return e, nil
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
		for j, sf := range v.SelectableFields {
			if !strings.HasPrefix(sf.JSONPath, ".") || strings.ContainsAny(sf.JSONPath, "[]*") {
				errs = append(errs, field.Invalid(p.Child("selectableFields").Index(j).Child("jsonPath"), sf.JSONPath, "must be a simple path like .spec.color"))
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
