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
