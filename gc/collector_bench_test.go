package gc_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/gc"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkCollectDependents deletes an owner of 1,000 ConfigMaps and waits until the
// collector has deleted them all (Background) or the owner is gone after them (Foreground);
// one op is one owner's whole cascade.
func BenchmarkCollectDependents(b *testing.B) {
	for _, policy := range []metav1.DeletionPropagation{metav1.DeletePropagationBackground, metav1.DeletePropagationForeground} {
		b.Run(fmt.Sprintf("policy=%s/dependents=1000", policy), func(b *testing.B) {
			env := registrytest.New(b, registrytest.Options{})
			client := env.Registry.Client("bench")
			c, err := gc.New(gc.Config{Client: env.Registry.Client("garbage-collector"), Kinds: env.Kinds})
			if err != nil {
				b.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { _ = c.Run(ctx); close(done) }()
			defer func() { cancel(); <-done }()
			ns := 0
			b.ReportAllocs()
			for b.Loop() {
				b.StopTimer()
				ns++
				namespace := fmt.Sprint("ns-", ns)
				env.Namespaces(b, namespace)
				owner, err := client.Create(ctx, cache.Key{Resource: "configmaps", Namespace: namespace, Name: "owner"},
					map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "owner"}})
				if err != nil {
					b.Fatal(err)
				}
				ref := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": owner.UID(), "blockOwnerDeletion": true}
				for i := range 1000 {
					name := fmt.Sprintf("dep-%04d", i)
					if _, err := client.Create(ctx, cache.Key{Resource: "configmaps", Namespace: namespace, Name: name},
						map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "ownerReferences": []any{ref}}}); err != nil {
						b.Fatal(err)
					}
				}
				t, err := env.Registry.TargetOf(owner.Key())
				if err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if _, _, err := env.Registry.Delete(ctx, t, cache.Preconditions{}, registry.Options{PropagationPolicy: policy}); err != nil {
					b.Fatal(err)
				}
				deadline := time.Now().Add(time.Minute)
				for {
					l, err := client.List(ctx, cache.GroupResource{Resource: "configmaps"}, cache.InNamespace(namespace))
					if err != nil {
						b.Fatal(err)
					}
					if len(l.Items) == 0 {
						break
					}
					if time.Now().After(deadline) {
						b.Fatalf("%d objects left after a minute", len(l.Items))
					}
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
}
