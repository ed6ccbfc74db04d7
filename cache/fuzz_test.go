package cache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
)

// FuzzStoreOps drives a store with a sequence of operations decoded from the input and checks
// its invariants: every write's version is greater than the last; the watch delivers strictly
// increasing versions; replaying the watch from the start reproduces List exactly; and a watch
// resumed from the store's first version sees the same sequence.
func FuzzStoreOps(f *testing.F) {
	f.Fuzz(func(t *testing.T, ops []byte) {
		ctx := context.Background()
		s := cache.New(cache.Config{WatchBuffer: 4 * len(ops), StartResourceVersion: 1000})
		defer s.Close()
		start := s.ResourceVersion()
		w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}})
		if err != nil {
			t.Fatal(err)
		}
		last := s.ResourceVersion()
		checkRV := func(o *cache.Object) {
			if o.ResourceVersion() > s.ResourceVersion() {
				t.Fatalf("object version %d ahead of the counter %d", o.ResourceVersion(), s.ResourceVersion())
			}
			if rv := s.ResourceVersion(); rv < last {
				t.Fatalf("the counter went back from %d to %d", last, rv)
			}
			last = s.ResourceVersion()
		}
		for i := 0; i+1 < len(ops); i += 2 {
			op, arg := ops[i]%8, ops[i+1]
			key := cachetest.Key([]string{"a", "b"}[arg%2], fmt.Sprint("o", arg%5))
			cur, getErr := s.Get(ctx, key)
			var obj map[string]any
			if getErr == nil {
				obj, _ = cur.Decode()
				delete(obj["metadata"].(map[string]any), "resourceVersion")
			}
			switch op {
			case 0: // create
				o, err := s.Create(ctx, key, cachetest.App(key.Name, int(arg)), cache.WriteOptions{})
				if err == nil {
					checkRV(o)
				}
			case 1: // spec update
				if obj != nil {
					obj["spec"].(map[string]any)["replicas"] = json.Number(fmt.Sprint(arg))
					if o, err := update(s, key, cache.Preconditions{}, obj); err == nil {
						checkRV(o)
					}
				}
			case 2: // update with a (possibly stale) resourceVersion
				if obj != nil {
					pre := cache.Preconditions{ResourceVersion: fmt.Sprint(cur.ResourceVersion() - uint64(arg%2))}
					if o, err := update(s, key, pre, obj); err == nil {
						checkRV(o)
					}
				}
			case 3: // delete
				if o, err := s.Delete(ctx, key, cache.Preconditions{}, cache.WriteOptions{}); err == nil {
					checkRV(o)
				}
			case 4: // add a finalizer
				if obj != nil {
					obj["metadata"].(map[string]any)["finalizers"] = []any{"f/" + fmt.Sprint(arg%3)}
					if o, err := update(s, key, cache.Preconditions{}, obj); err == nil {
						checkRV(o)
					}
				}
			case 5: // remove finalizers
				if obj != nil {
					delete(obj["metadata"].(map[string]any), "finalizers")
					if o, err := update(s, key, cache.Preconditions{}, obj); err == nil {
						checkRV(o)
					}
				}
			case 6: // label change
				if obj != nil {
					obj["metadata"].(map[string]any)["labels"] = map[string]any{"l": fmt.Sprint(arg % 3)}
					if o, err := update(s, key, cache.Preconditions{}, obj); err == nil {
						checkRV(o)
					}
				}
			case 7: // dry run
				_, _ = s.Create(ctx, key, cachetest.App(key.Name, 1), cache.WriteOptions{DryRun: true})
			}
		}

		final, err := s.List(ctx, cachetest.Applications)
		if err != nil {
			t.Fatal(err)
		}
		replayed := map[cache.Key][]byte{}
		var seen []uint64
		prev := uint64(0)
		drain := func(w *cache.Watcher) {
			for _, ev := range cachetest.Drain(t, w, 5*time.Second) {
				if ev.ResourceVersion <= prev {
					t.Fatalf("watch versions not increasing: %d after %d", ev.ResourceVersion, prev)
				}
				prev = ev.ResourceVersion
				seen = append(seen, ev.ResourceVersion)
				if ev.Type == cache.Deleted {
					delete(replayed, ev.Object.Key())
				} else {
					replayed[ev.Object.Key()] = ev.Object.Raw()
				}
			}
		}
		drain(w)
		if len(replayed) != len(final.Items) {
			t.Fatalf("replay has %d objects, List %d", len(replayed), len(final.Items))
		}
		for _, o := range final.Items {
			if string(replayed[o.Key()]) != string(o.Raw()) {
				t.Fatalf("replay differs from List for %s", o.Key())
			}
		}

		resumed, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}, ResourceVersion: start})
		if err != nil {
			t.Fatal(err)
		}
		live := seen
		seen, prev = nil, 0
		replayed = map[cache.Key][]byte{}
		drain(resumed)
		if fmt.Sprint(seen) != fmt.Sprint(live) {
			t.Fatalf("a resumed watch saw %v, the live one %v", seen, live)
		}
	})
}

// update replaces the object at key with obj under pre.
func update(s cache.Interface, key cache.Key, pre cache.Preconditions, obj map[string]any) (*cache.Object, error) {
	return s.GuaranteedUpdate(context.Background(), key, pre, func(*cache.Object) (cache.Update, error) {
		return cache.Update{Object: obj}, nil
	}, cache.WriteOptions{})
}
