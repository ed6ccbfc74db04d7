package reconciler

import (
	"fmt"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/metrics"
	"k8s.io/utils/clock"
)

// BenchmarkQueueAddGet is one key through the controller's work queue (with its metrics):
// Add, Get, Done, Forget, as a worker takes it.
func BenchmarkQueueAddGet(b *testing.B) {
	for _, distinct := range []int{1, 1000} {
		b.Run(fmt.Sprint("keys=", distinct), func(b *testing.B) {
			q := newQueue("bench", time.Second, 16*time.Second, 10, 100, metrics.New(), clock.RealClock{})
			defer q.ShutDown()
			keys := make([]cache.Key, distinct)
			for i := range keys {
				keys[i] = cache.Key{Group: "cloudnative.elide.dev", Resource: "applications", Namespace: "default", Name: fmt.Sprint("app-", i)}
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				q.Add(keys[i%distinct])
				k, _ := q.Get()
				q.Forget(k)
				q.Done(k)
				i++
			}
		})
	}
}
