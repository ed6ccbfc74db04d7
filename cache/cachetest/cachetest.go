// Package cachetest holds the store conformance suite (in the shape of apiserver's
// storage/testing) and helpers to seed stores and read watchers in tests. Any store behind the
// cache API must pass RunConformance.
package cachetest

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
)

// Applications is the resource the suite writes.
var Applications = cache.GroupResource{Group: "cloudnative.elide.dev", Resource: "applications"}

// Key returns the key of Application name in namespace ns.
func Key(ns, name string) cache.Key {
	return cache.Key{Group: Applications.Group, Resource: Applications.Resource, Namespace: ns, Name: name}
}

// App builds an Application object.
func App(name string, replicas int) map[string]any {
	return map[string]any{
		"apiVersion": "cloudnative.elide.dev/v1",
		"kind":       "Application",
		"metadata":   map[string]any{"name": name},
		"spec":       map[string]any{"replicas": json.Number(itoa(replicas)), "image": "nginx:1.27"},
	}
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// Collect reads n events from w, failing the test if they do not arrive within timeout or the
// channel closes first.
func Collect(t testing.TB, w *cache.Watcher, n int, timeout time.Duration) []cache.Event {
	t.Helper()
	out := make([]cache.Event, 0, n)
	deadline := time.After(timeout)
	for len(out) < n {
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch closed after %d of %d events: %v", len(out), n, w.Err())
			}
			out = append(out, ev)
		case <-deadline:
			t.Fatalf("got %d of %d events within %v", len(out), n, timeout)
		}
	}
	return out
}

// Drain takes every event w has up to the store's current version (until w.Progress says
// nothing is pending), failing the test if that takes longer than timeout or the channel
// closes. Delivery beyond a watcher's first few events is asynchronous, so an empty channel
// alone does not mean the watcher is drained.
func Drain(t testing.TB, w *cache.Watcher, timeout time.Duration) []cache.Event {
	t.Helper()
	var out []cache.Event
	deadline := time.After(timeout)
	for {
		if _, ok := w.Progress(); ok {
			return out
		}
		select {
		case ev, ok := <-w.Events():
			if !ok {
				t.Fatalf("watch closed after %d events: %v", len(out), w.Err())
			}
			out = append(out, ev)
		case <-time.After(50 * time.Microsecond):
		case <-deadline:
			t.Fatalf("watch not drained within %v (%d events taken)", timeout, len(out))
		}
	}
}

// ExpectNone fails if w delivers an event within wait.
func ExpectNone(t testing.TB, w *cache.Watcher, wait time.Duration) {
	t.Helper()
	select {
	case ev, ok := <-w.Events():
		if ok {
			t.Fatalf("unexpected event %s %s", ev.Type, ev.Object.Key())
		}
	case <-time.After(wait):
	}
}

// Closed waits for w's channel to close (draining it) and returns Err.
func Closed(t testing.TB, w *cache.Watcher, timeout time.Duration) error {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case _, ok := <-w.Events():
			if !ok {
				return w.Err()
			}
		case <-deadline:
			t.Fatalf("watch not closed within %v", timeout)
		}
	}
}

// Decode decodes o, failing the test on error.
func Decode(t testing.TB, o *cache.Object) map[string]any {
	t.Helper()
	m, err := o.Decode()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Meta returns metadata[field] of o.
func Meta(t testing.TB, o *cache.Object, field string) any {
	t.Helper()
	return Decode(t, o)["metadata"].(map[string]any)[field]
}
