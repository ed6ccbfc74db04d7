package etcd_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/etcd"
	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/opemu/opemu/registry/registrytest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// prefixes makes every store of a test package use a key prefix of its own.
var prefixes atomic.Int64

// newStore makes a store over client under a fresh prefix, closed when the test ends.
func newStore(t testing.TB, client *clientv3.Client, cfg cache.Config) *etcd.Store {
	t.Helper()
	s, err := etcd.New(etcd.Config{Client: client, Prefix: fmt.Sprintf("/test-%d", prefixes.Add(1)), Cache: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestConformance runs the storage contract's suite over etcd: one etcd for the run, a prefix
// per store. The stores take their versions from etcd's one revision counter, so the cases
// run one at a time (SharedCounter), and a removal's DELETED event carries the last state
// stored (etcd stores nothing at a deletion).
func TestConformance(t *testing.T) {
	client := etcdtest.Start(t).Client(t)
	cachetest.RunFactory(t, cachetest.Factory{
		New: func(t *testing.T, cfg cache.Config) cache.Interface {
			return newStore(t, client, cfg)
		},
		SharedCounter: true,
	})
}

// TestRules runs the rules of objects over etcd: the write path is the same over any store.
func TestRules(t *testing.T) {
	client := etcdtest.Start(t).Client(t)
	registrytest.RunRules(t, func(t *testing.T) cache.Interface {
		return newStore(t, client, cache.Config{})
	})
}
