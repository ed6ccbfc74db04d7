package crd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
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
	// MaxCRDs bounds the CRDs a create or update may leave served, built-in ones not counted
	// (a 403 beyond, limits.go). Zero means DefaultMaxCRDs.
	MaxCRDs int
	// MaxCRDBytes bounds the total size of those CRDs as JSON (a 403 beyond). Zero means
	// DefaultMaxCRDBytes.
	MaxCRDBytes int64
	// Logger gets the causes of failed conversion webhook calls. Nil means slog.Default().
	Logger *slog.Logger
}

// entry is one registered CRD with its kinds per served version.
type entry struct {
	crd     *apiextv1.CustomResourceDefinition
	served  []*kinds.Kind // served versions, in spec order
	storage *kinds.Kind   // the storage version's Kind (served or not)
	builtIn bool
	bytes   int64 // the CRD's size as JSON (sizeOf)
}

// Registry holds the registered CRDs and serves their kinds through a kinds.Registry. Create it
// with New; the zero value is not usable.
type Registry struct {
	cfg Config

	// mu guards byName. Registering takes it across the conflict check and kinds.Replace, so two
	// CRDs cannot take the same names.
	mu     sync.Mutex
	byName map[string]*entry
	// cleaning are the deleted CRDs being cleaned up now (cleanUp), guarded by mu.
	cleaning map[string]bool

	client Client // set once by UseClient, before serving

	// factory makes the converters of CRDs with several versions (convert.go).
	factory *conversion.CRConverterFactory
}

// New returns an empty registry.
func New(cfg Config) (*Registry, error) {
	if cfg.Kinds == nil {
		return nil, errors.New("crd: Kinds is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	factory, err := newConverterFactory(cfg.Logger)
	if err != nil {
		return nil, err
	}
	return &Registry{cfg: cfg, byName: map[string]*entry{}, cleaning: map[string]bool{}, factory: factory}, nil
}

// AddBuiltIn registers a CRD the server itself defines (the Application CRD): it is served
// like any other but cannot be replaced or deleted. Its schemas compile on first use.
func (r *Registry) AddBuiltIn(c *apiextv1.CustomResourceDefinition) error {
	c = c.DeepCopy()
	defaultCRD(c)
	e, err := r.prepare(c, true)
	if err != nil {
		return err
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

// Register validates c as a new CRD, compiles each version's schema once and serves its kinds
// at once. It returns the stored copy (defaulted, Established and NamesAccepted), or the field
// errors that make c invalid. Registering an existing name replaces it, except a built-in CRD
// (ErrBuiltIn).
func (r *Registry) Register(c *apiextv1.CustomResourceDefinition) (*apiextv1.CustomResourceDefinition, field.ErrorList, error) {
	c = c.DeepCopy()
	defaultCRD(c)
	if len(c.Status.StoredVersions) == 0 {
		prepareForCreate(c)
	}
	if errs, _, err := validateCRD(ctx, c, nil); err != nil || len(errs) > 0 {
		return nil, errs, err
	}
	return r.serve(c)
}

// serve compiles c, a CRD already validated (stored, or checked by Check), and serves its kinds.
func (r *Registry) serve(c *apiextv1.CustomResourceDefinition) (*apiextv1.CustomResourceDefinition, field.ErrorList, error) {
	e, err := r.prepare(c, false)
	if err != nil {
		return nil, nil, err
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

// Check returns what storing c would store (a create, old nil, or an update of the stored
// old), with the warnings kube-apiserver gives, or its field errors, registering nothing: c is
// defaulted, prepared and validated as kube-apiserver's CRD strategy does it, then compiled.
func (r *Registry) Check(c, old *apiextv1.CustomResourceDefinition) (*apiextv1.CustomResourceDefinition, []string, field.ErrorList, error) {
	c = c.DeepCopy()
	defaultCRD(c)
	if old == nil {
		prepareForCreate(c)
	} else {
		prepareForUpdate(c, old)
	}
	// Before the costly validation and compilation; checked again below, as they took time.
	bytes := sizeOf(c)
	r.mu.Lock()
	err := r.checkBoundsLocked(c, bytes)
	r.mu.Unlock()
	if err != nil {
		return nil, nil, nil, err
	}
	errs, warnings, err := validateCRD(ctx, c, old)
	if err != nil || len(errs) > 0 {
		return nil, nil, errs, err
	}
	e, err := r.prepare(c, false)
	if err != nil {
		return nil, nil, nil, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.byName[e.crd.Name]; ok && old.builtIn {
		return nil, nil, nil, ErrBuiltIn
	}
	if errs := r.conflictsLocked(e); len(errs) > 0 {
		return nil, nil, errs, nil
	}
	if err := r.checkBoundsLocked(c, bytes); err != nil {
		return nil, nil, nil, err
	}
	if old == nil || len(e.crd.Status.Conditions) == 0 {
		setConditions(e.crd)
	}
	e.crd.Status.AcceptedNames = e.crd.Spec.Names
	return e.crd, warnings, nil, nil
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

// prepare turns each version of c, a valid CRD, into a Kind with its schema compiled (for a
// built-in CRD lazily: on first use, and with no Lifecycle: it is never deleted).
func (r *Registry) prepare(c *apiextv1.CustomResourceDefinition, builtIn bool) (*entry, error) {
	e := &entry{crd: c}
	if !builtIn {
		e.bytes = sizeOf(c)
	}
	schemas := map[string]kinds.Schema{} // by version, served or not
	tc := newTypes(c, builtIn)
	var lc kinds.Lifecycle
	if !builtIn {
		lc = objects{r: r, crd: c.Name, gr: k8sschema.GroupResource{Group: c.Spec.Group, Resource: c.Spec.Names.Plural}, terminating: c.DeletionTimestamp != nil}
	}
	for _, v := range c.Spec.Versions {
		k := &kinds.Kind{
			Group: c.Spec.Group, Version: v.Name, Kind: c.Spec.Names.Kind, ListKind: c.Spec.Names.ListKind,
			Plural: c.Spec.Names.Plural, Singular: c.Spec.Names.Singular,
			ShortNames: c.Spec.Names.ShortNames, Categories: c.Spec.Names.Categories,
			Namespaced: c.Spec.Scope == apiextv1.NamespaceScoped, CRDName: c.Name, Lifecycle: lc,
			Warning: deprecation(c.Spec.Group, c.Spec.Names.Kind, v), TypeConverter: tc,
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
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			s, err := newSchema(v.Schema.OpenAPIV3Schema, k.Scale, builtIn)
			if err != nil {
				return nil, fmt.Errorf("crd %s: version %s: %w", c.Name, v.Name, err)
			}
			k.Schema = s
			schemas[k.GroupVersion()] = s
		}
		if v.Storage {
			e.storage = k
		}
		if v.Served {
			e.served = append(e.served, k)
		}
	}
	if e.storage == nil {
		return nil, fmt.Errorf("crd %s: no storage version", c.Name)
	}
	conv, err := r.converterFor(c, schemas)
	if err != nil {
		return nil, fmt.Errorf("crd %s: %w", c.Name, err)
	}
	for _, k := range e.served {
		if conv != nil {
			k.ManagedConvertor = conv.safe
		}
		k.StorageVersion = e.storage.Version
		if conv != nil && k != e.storage {
			conv.view(k, e.storage)
		}
	}
	if conv != nil {
		// Objects written before the storage version moved are in a former one.
		e.storage.Upgrade = conv.reader(e.storage)
		e.storage.ManagedConvertor = conv.safe
	}
	e.storage.StorageVersion = e.storage.Version
	return e, nil
}

// setConditions marks crd Established and NamesAccepted, as the apiserver does once it serves it.
func setConditions(crd *apiextv1.CustomResourceDefinition) {
	now := metav1.Now()
	crd.Status.AcceptedNames = crd.Spec.Names
	crd.Status.Conditions = []apiextv1.CustomResourceDefinitionCondition{
		{Type: apiextv1.NamesAccepted, Status: apiextv1.ConditionTrue, Reason: "NoConflicts", Message: "no conflicts found", LastTransitionTime: now},
		{Type: apiextv1.Established, Status: apiextv1.ConditionTrue, Reason: "InitialNamesAccepted", Message: "the initial names have been accepted", LastTransitionTime: now},
	}
}
