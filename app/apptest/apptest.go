// Package apptest wires opemu's core for tests below HTTP the way package app wires it for a
// server: registrytest's store, kinds and write path, with opemu's built-in CRDs (Application,
// Fault, Controller) and the Application admission chain under the binary's default image
// policy. Tests that need only the write path (those of events, etcd, leader) use registrytest
// alone.
//
// Concurrency: each Env is independent; see registrytest.
package apptest

import (
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/opemu/opemu/application"
	"github.com/opemu/opemu/faults"
	"github.com/opemu/opemu/hooks"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/opemu/opemu/webhooks"
)

// Options tweak an Env: registrytest's, whose BuiltIns are served after opemu's and whose
// Admission replaces the Application chain; and the chain's recorder. The zero value is the
// binary's defaults.
type Options struct {
	registrytest.Options
	// Metrics observes the Application chain's handler calls; nil records nothing.
	Metrics webhooks.Recorder
}

// New wires and bootstraps an Env; its store is closed when the test ends.
func New(t testing.TB, opts Options) *registrytest.Env {
	t.Helper()
	o, err := withBuiltIns(opts)
	if err != nil {
		t.Fatal(err)
	}
	return registrytest.New(t, o)
}

// Wire is New without a test: for benchmarks' setup and examples.
func Wire(opts Options) (*registrytest.Env, error) {
	o, err := withBuiltIns(opts)
	if err != nil {
		return nil, err
	}
	return registrytest.Wire(o)
}

// withBuiltIns is opts' registrytest.Options with opemu's built-in CRDs and, unless opts has
// its own, the Application chain.
func withBuiltIns(opts Options) (registrytest.Options, error) {
	o := opts.Options
	o.BuiltIns = append([]*apiextensionsv1.CustomResourceDefinition{application.CRD(), faults.CRD(), hooks.CRD()}, o.BuiltIns...)
	if o.Admission == nil {
		chain, err := application.NewChain(application.ChainConfig{
			AllowedRegistries: []string{"docker.io", "gcr.io"},
			BlockedImages:     []string{"ubuntu", "debian", "alpine"},
			Recorder:          opts.Metrics,
		})
		if err != nil {
			return o, err
		}
		o.Admission = chain
	}
	return o, nil
}
