package etcd

import (
	"context"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// leases hands out etcd leases for objects that expire (cache.WriteOptions.TTL), as
// kube-apiserver's lease manager does: a lease granted for ttl plus a reuse window serves every
// write of the same ttl while it still expires between ttl and ttl plus the window from now,
// so a burst of Events costs one grant, not one each. An object so expires between ttl and ttl
// plus the window (5% of ttl, at most a minute) after its last write.
type leases struct {
	client *clientv3.Client

	// mu guards byTTL.
	mu    sync.Mutex
	byTTL map[time.Duration]grant
}

type grant struct {
	id      clientv3.LeaseID
	expires time.Time
}

// get returns a lease that expires between ttl and ttl plus the reuse window from now.
func (l *leases) get(ctx context.Context, ttl time.Duration) (clientv3.LeaseID, error) {
	ttl = max(ttl.Round(time.Second), time.Second)
	window := min(ttl/20, time.Minute)
	now := time.Now()
	l.mu.Lock()
	g, ok := l.byTTL[ttl]
	l.mu.Unlock()
	if ok && g.expires.After(now.Add(ttl)) && !g.expires.After(now.Add(ttl+window)) {
		return g.id, nil
	}
	seconds := int64((ttl + window + time.Second - 1) / time.Second)
	resp, err := l.client.Grant(ctx, seconds)
	if err != nil {
		return 0, err
	}
	l.mu.Lock()
	if l.byTTL == nil {
		l.byTTL = map[time.Duration]grant{}
	}
	l.byTTL[ttl] = grant{id: resp.ID, expires: now.Add(time.Duration(seconds) * time.Second)}
	l.mu.Unlock()
	return resp.ID, nil
}
