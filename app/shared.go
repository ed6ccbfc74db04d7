package app

import (
	"context"
	"time"

	"github.com/opemu/opemu/cache"
)

// sharedStore is a store whose truth replicas share (package etcd's), with what the wiring
// needs of it beyond cache.Interface.
type sharedStore interface {
	cache.Interface
	// EndWatches ends this replica's watches of a resource whose CRD another replica deleted.
	EndWatches(gr cache.GroupResource)
	// Health says whether the truth answers (for /readyz).
	Health(ctx context.Context) error
	// RunCompaction compacts the truth's history every interval until ctx ends (the leader).
	RunCompaction(ctx context.Context, interval time.Duration) error
}

// EtcdBuiltIn reports whether this binary can serve STORE=etcd. The etcd client (gRPC) adds
// about 11 MiB to an idle process, beyond SPEC §10's 30 MiB, so it is built in only with
// `-tags etcd` (etcd.go); the default binary is the in-memory one.
func EtcdBuiltIn() bool { return openEtcd != nil }
