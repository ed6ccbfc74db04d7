package cache_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"k8s.io/apimachinery/pkg/labels"
)

// seed fills a store with n Applications: 10,000 in namespace "big", the rest spread over
// namespaces of 1,000.
func seed(b *testing.B, n int) *cache.Store {
	b.Helper()
	s := cache.New(cache.Config{WatchHistory: 1000})
	ctx := context.Background()
	for i := range n {
		ns := "big"
		if i >= 10000 {
			ns = fmt.Sprint("ns-", i/1000)
		}
		if _, err := s.Create(ctx, cachetest.Key(ns, fmt.Sprint("app-", i)), cachetest.App("x", 1), cache.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	return s
}

// BenchmarkStoreCreate adds objects to a store already holding 10,000 or 100,000.
func BenchmarkStoreCreate(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprint("objects=", n), func(b *testing.B) {
			s := seed(b, n)
			defer s.Close()
			ctx := context.Background()
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				if _, err := s.Create(ctx, cachetest.Key("default", fmt.Sprint("new-", i)), cachetest.App("x", 1), cache.WriteOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkStoreUpdate(b *testing.B) {
	s := cache.New(cache.Config{})
	defer s.Close()
	ctx := context.Background()
	key := cachetest.Key("default", "app")
	if _, err := s.Create(ctx, key, cachetest.App("app", 1), cache.WriteOptions{}); err != nil {
		b.Fatal(err)
	}
	i := 0
	b.ReportAllocs()
	for b.Loop() {
		i++
		if _, err := replaceApp(s, key, cachetest.App("app", i%100)); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStoreGet(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprint("objects=", n), func(b *testing.B) {
			s := seed(b, n)
			ctx := context.Background()
			key := cachetest.Key("big", "app-5000")
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.Get(ctx, key); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkStoreList lists the namespace holding 10,000 objects, alone or among 100,000.
func BenchmarkStoreList(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		b.Run(fmt.Sprint("objects=", n), func(b *testing.B) {
			s := seed(b, n)
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				res, err := s.List(ctx, cachetest.Applications, cache.InNamespace("big"))
				if err != nil || len(res.Items) != 10000 {
					b.Fatal(err, len(res.Items))
				}
			}
		})
	}
}

// BenchmarkWatchFanout measures one write delivered to 1,000 watchers, each drained by its own
// goroutine; an op ends when every watcher has the event.
func BenchmarkWatchFanout(b *testing.B) {
	const watchers = 1000
	b.Run(fmt.Sprint("watchers=", watchers), func(b *testing.B) {
		s := cache.New(cache.Config{WatchBuffer: 1 << 16})
		defer s.Close()
		ctx := context.Background()
		var wg sync.WaitGroup
		var got sync.WaitGroup
		for range watchers {
			w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}})
			if err != nil {
				b.Fatal(err)
			}
			wg.Go(func() {
				for range w.Events() {
					got.Done()
				}
			})
		}
		key := cachetest.Key("default", "app")
		got.Add(watchers)
		if _, err := s.Create(ctx, key, cachetest.App("app", 1), cache.WriteOptions{}); err != nil {
			b.Fatal(err)
		}
		got.Wait()
		i := 0
		b.ReportAllocs()
		for b.Loop() {
			i++
			got.Add(watchers)
			if _, err := replaceApp(s, key, cachetest.App("app", i%100+2)); err != nil {
				b.Fatal(err)
			}
			got.Wait()
		}
		s.Close()
		wg.Wait()
	})
}

func replaceApp(s cache.Interface, key cache.Key, obj map[string]any) (*cache.Object, error) {
	return s.GuaranteedUpdate(context.Background(), key, cache.Preconditions{}, func(*cache.Object) (cache.Update, error) {
		return cache.Update{Object: obj}, nil
	}, cache.WriteOptions{})
}

// BenchmarkStoreCreateSelectiveWatchers measures a create while 200 watchers each hold a
// selector of the largest size the server accepts (4 KiB: about 500 requirements, all of
// which a non-matching object passes), each drained by its own goroutine. Selectors are
// evaluated by the watchers' pumps, not under the store's lock, so the writer does not pay
// for them (compare watchers=0).
func BenchmarkStoreCreateSelectiveWatchers(b *testing.B) {
	var reqs []string
	for i := 0; len(strings.Join(reqs, ",")) < 4000; i++ {
		reqs = append(reqs, fmt.Sprintf("k%d!=x", i))
	}
	sel, err := labels.Parse(strings.Join(reqs, ","))
	if err != nil {
		b.Fatal(err)
	}
	for _, watchers := range []int{0, 200} {
		b.Run(fmt.Sprint("watchers=", watchers), func(b *testing.B) {
			s := cache.New(cache.Config{WatchBuffer: 1 << 20})
			ctx := context.Background()
			var wg sync.WaitGroup
			for range watchers {
				w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}, Label: sel})
				if err != nil {
					b.Fatal(err)
				}
				wg.Go(func() {
					for range w.Events() {
					}
				})
			}
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				i++
				if _, err := s.Create(ctx, cachetest.Key("default", fmt.Sprint("app-", i)), cachetest.App("x", 1), cache.WriteOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			s.Close()
			wg.Wait()
		})
	}
}
