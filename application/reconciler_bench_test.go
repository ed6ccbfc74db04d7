package application_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/opemu/opemu/app/apptest"
	"github.com/opemu/opemu/application"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/reconciler"
	"github.com/opemu/opemu/registry"
)

// passes is the Application reconciler with every finished pass reported on done.
type passes struct {
	*application.Reconciler
	done chan cache.Key
}

func (p passes) Reconcile(ctx context.Context, key cache.Key) (reconciler.Result, error) {
	res, err := p.Reconciler.Reconcile(ctx, key)
	select {
	case p.done <- key:
	case <-ctx.Done():
	}
	return res, err
}

// BenchmarkReconcileToReady is one Application's life up to Ready as the binary runs it with
// ROLLOUT_STEP=0 on the in-memory store: a client creates it, the controller's informer sees
// it, and the reconciler's passes (the first adds the finalizer and writes the rolled-out
// status, the second, after the finalizer's update, finds nothing to do) run with Events
// recorded into the store. An op ends when the object's second pass is done and it is Running.
func BenchmarkReconcileToReady(b *testing.B) {
	env, err := apptest.Wire(apptest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer env.Storage.Close()
	rec := events.New(events.Config{Client: env.Registry.Client("event-recorder")})
	app := application.New(application.Config{Client: env.Registry.Client(application.Source), Events: rec})
	p := passes{Reconciler: app, done: make(chan cache.Key, 64)}
	ctrl, err := reconciler.New(reconciler.Config{Store: env.Storage, Resource: application.Resource, Reconciler: p, Name: "application"})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { _ = ctrl.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	client := env.Registry.Client("bench")

	n, total := 0, 0
	b.ReportAllocs()
	for b.Loop() {
		n++
		key := cachetest.Key("default", "app-"+strconv.Itoa(n))
		if _, err := client.Create(ctx, key, cachetest.App(key.Name, 3)); err != nil {
			b.Fatal(err)
		}
		total += waitReady(b, ctx, client, p.done, key)
	}
	b.ReportMetric(float64(total)/float64(n), "passes/op")
}

// waitReady waits for key's second pass to end with the object Running and returns how many
// passes that took.
func waitReady(b *testing.B, ctx context.Context, client *registry.Client, done <-chan cache.Key, key cache.Key) int {
	n := 0
	for k := range done {
		if k != key {
			continue
		}
		if n++; n < 2 {
			continue
		}
		obj, err := client.Get(ctx, key)
		if err != nil {
			b.Fatal(err)
		}
		if obj.Field("status.phase") == "Running" {
			return n
		}
		if n > 10 {
			b.Fatalf("%s not Running after %d passes", key, n)
		}
	}
	return n
}
