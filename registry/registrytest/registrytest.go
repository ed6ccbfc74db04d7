// Package registrytest wires the write path for tests: an in-memory store (or the store under
// test), the served kinds (the Event kind with its rules from package events), the CRD
// registry with the built-in CRDs it is given, the admission chain it is given and the write
// path, bootstrapped (the system namespaces and the built-in CRDs exist; a test creates any
// other namespace it writes into, as on a cluster: Env.Namespaces). It imports nothing
// above registry, so the tests of the packages below opemu's kinds (events, etcd, leader) use
// it without them; app/apptest adds opemu's built-in CRDs and the Application admission chain,
// as package app wires them. It also holds the conformance suite of the rules of objects
// (RunRules), which any store behind the write path must pass.
package registrytest

import (
	"context"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/calls"
	"github.com/opemu/opemu/crd"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/webhooks"
)

// Options tweak an Env. The zero value is a memory store with the built-in kinds only and no
// admission.
type Options struct {
	// Storage is the store under test. Nil means a new cache.Store made with Store.
	Storage cache.Interface
	// Store configures the cache.Store made when Storage is nil (SelectableFields is set).
	Store cache.Config
	// BuiltIns are CRDs served from the start, as opemu's own (crd.Registry.AddBuiltIn).
	BuiltIns []*apiextensionsv1.CustomResourceDefinition
	// Admission is the admission chain of every write; nil admits everything unchanged.
	Admission *webhooks.Chain
	// Events makes the recorder of the write path's Events (registry.Config.Events); nil
	// records none.
	Events func(*registry.Client) registry.EventRecorder
	// EventLimit is the Event kind's limit (events.KindConfig.Limit); zero means none.
	EventLimit int
	// ReadOnly names objects clients may not write.
	ReadOnly func(cache.Key) bool
	// Calls records the in-process clients' writes (registry.Config.Calls); nil records none.
	Calls *calls.Record
}

// Env is one wired core.
type Env struct {
	Storage   cache.Interface
	Kinds     *kinds.Registry
	CRDs      *crd.Registry
	Admission *webhooks.Chain
	Registry  *registry.Store
}

// New wires and bootstraps an Env; its store is closed when the test ends.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	e, err := Wire(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Storage.Close)
	return e
}

// Wire is New without a test: for benchmarks' setup and examples.
func Wire(opts Options) (*Env, error) {
	served := kinds.New(events.Kind(events.KindConfig{Limit: opts.EventLimit}))
	storage := opts.Storage
	if storage == nil {
		cfg := opts.Store
		if cfg.SelectableFields == nil {
			cfg.SelectableFields = served.AppendFields
		}
		storage = cache.New(cfg)
	}
	crds, err := crd.New(crd.Config{Kinds: served, Drop: storage.DropResource})
	if err != nil {
		return nil, err
	}
	if err := served.Add(crds.Kind()); err != nil {
		return nil, err
	}
	for _, c := range opts.BuiltIns {
		if err := crds.AddBuiltIn(c); err != nil {
			return nil, err
		}
	}
	reg, err := registry.New(registry.Config{Storage: storage, Kinds: served, Admission: opts.Admission, Events: opts.Events, ReadOnly: opts.ReadOnly, Calls: opts.Calls})
	if err != nil {
		return nil, err
	}
	crds.UseClient(reg.Client("apiextensions-apiserver"))
	var seeds []any
	for _, c := range crds.BuiltIns() {
		seeds = append(seeds, c)
	}
	if err := reg.Bootstrap(context.Background(), seeds...); err != nil {
		return nil, err
	}
	return &Env{Storage: storage, Kinds: served, CRDs: crds, Admission: opts.Admission, Registry: reg}, nil
}

// Namespaces creates the namespaces names through the write path, as a test does on a cluster
// before it writes into them (a create into a missing namespace is a 404).
func (e *Env) Namespaces(t testing.TB, names ...string) {
	t.Helper()
	c := e.Registry.Client("registrytest")
	for _, name := range names {
		ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}
		if _, err := c.Create(context.Background(), cache.Key{Resource: "namespaces", Name: name}, ns); err != nil {
			t.Fatal(err)
		}
	}
}
