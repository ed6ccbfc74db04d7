// Package registrytest wires opemu's core for tests, the way package app does for the binary:
// an in-memory store, the served kinds with the built-in Application, Fault and Controller CRDs, the Application
// admission chain and the write path, bootstrapped (the default namespace and the built-in
// CRDs exist). It also holds the conformance suite of the rules of objects (RunRules), which
// any store behind the write path must pass.
package registrytest

import (
	"context"
	"testing"

	"github.com/opemu/opemu/application"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/crd"
	"github.com/opemu/opemu/faults"
	"github.com/opemu/opemu/hooks"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/webhooks"
)

// Options tweak an Env. The zero value is the binary's defaults.
type Options struct {
	// Storage is the store under test. Nil means a new cache.Store made with Store.
	Storage cache.Interface
	// Store configures the cache.Store made when Storage is nil (SelectableFields is set).
	Store cache.Config
	// Admission replaces the Application chain.
	Admission *webhooks.Chain
	// Metrics observes the Application chain's handler calls; nil records nothing.
	Metrics webhooks.Recorder
	// Events records the write path's Events; nil records none.
	Events registry.EventRecorder
	// EventLimit counts client-created Events against the recorder's limit; nil counts none.
	EventLimit registry.EventLimit
	// ReadOnly names objects clients may not write.
	ReadOnly func(cache.Key) bool
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
	served := kinds.New()
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
	if err := crds.AddBuiltIn(application.CRD()); err != nil {
		return nil, err
	}
	if err := crds.AddBuiltIn(faults.CRD()); err != nil {
		return nil, err
	}
	if err := crds.AddBuiltIn(hooks.CRD()); err != nil {
		return nil, err
	}
	chain := opts.Admission
	if chain == nil {
		if chain, err = application.NewChain(application.ChainConfig{
			AllowedRegistries: []string{"docker.io", "gcr.io"},
			BlockedImages:     []string{"ubuntu", "debian", "alpine"},
			Recorder:          opts.Metrics,
		}); err != nil {
			return nil, err
		}
	}
	reg, err := registry.New(registry.Config{Storage: storage, Kinds: served, Admission: chain, Events: opts.Events, EventLimit: opts.EventLimit, ReadOnly: opts.ReadOnly})
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
	return &Env{Storage: storage, Kinds: served, CRDs: crds, Admission: chain, Registry: reg}, nil
}
