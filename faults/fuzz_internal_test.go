package faults

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// noClient is a Client for an engine that is never run.
type noClient struct{}

func (noClient) Watch(context.Context, cache.WatchOptions) (*cache.Watcher, error) {
	return nil, errors.New("not running")
}
func (noClient) UpdateStatus(context.Context, cache.Key, map[string]any) (*cache.Object, error) {
	return nil, errors.New("not running")
}

// FuzzRule reads any stored Fault, valid for the schema or not (a store written before a schema
// change, or by hand), and matches a request against it: never a panic; an injected error is a
// Status of the Fault's code saying it was injected; a Fault the engine cannot apply injects
// nothing.
func FuzzRule(f *testing.F) {
	for _, seed := range []string{
		`{"match":{"verbs":["update"],"resource":"applications","subresource":"status"},"action":{"status":409},"every":3}`,
		`{"action":{"watch":{"closeAfter":"5s","expire":true}}}`,
		`{"action":{"status":429,"retryAfterSeconds":1},"count":2}`,
		`{"match":{"verbs":["list"]},"action":{"delay":"300ms"},"expiresAfter":"10m"}`,
		`{"action":{"status":418}}`, `{"action":{"delay":"-1s"}}`, `{"action":{}}`, `{"probability":"x"}`, `[]`, `null`,
	} {
		f.Add([]byte(seed), "update", "cloudnative.elide.dev", "applications", "status", "default", "web", "kubectl/v1.32")
	}
	store := cache.New(cache.Config{})
	defer store.Close()
	e, err := New(Config{Client: noClient{}, Rand: func() float64 { return 0.5 }})
	if err != nil {
		f.Fatal(err)
	}
	key := cache.Key{Group: Resource.Group, Resource: Resource.Resource, Name: "f"}
	f.Fuzz(func(t *testing.T, spec []byte, verb, group, resource, sub, ns, name, ua string) {
		var s any
		if json.Unmarshal(spec, &s) != nil {
			return
		}
		obj := map[string]any{"apiVersion": "faults.opemu.dev/v1", "kind": "Fault",
			"metadata": map[string]any{"name": key.Name, "uid": "u", "creationTimestamp": "2026-11-24T10:00:00Z"}, "spec": s}
		// A dry run makes the stored form without keeping it.
		o, err := store.Create(context.Background(), key, obj, cache.WriteOptions{DryRun: true})
		if err != nil {
			return
		}
		r, _ := newRule(o)
		r.c = &counter{}
		req := Request{Verb: verb, Group: group, Resource: resource, Subresource: sub, Namespace: ns, Name: name, UserAgent: ua}
		if !r.matches(req) {
			return
		}
		if r.invalid != "" {
			t.Fatalf("an invalid Fault (%s) matched", r.invalid)
		}
		inj := e.fire(r, req, time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
		if inj == nil || inj.Err == nil {
			return
		}
		var se *apierrors.StatusError
		if !errors.As(inj.Err, &se) || int(se.Status().Code) != r.status || !strings.Contains(se.Status().Message, "injected by Fault") {
			t.Fatalf("injected %v for status %d", inj.Err, r.status)
		}
	})
}
