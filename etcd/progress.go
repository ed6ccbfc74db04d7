package etcd

import (
	"context"
	"sync"

	"github.com/opemu/opemu/cache"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The progress key, <prefix>/progress, is written when a consistent read finds etcd's revision
// ahead of this replica's cache without an event on the way: writes outside the prefix (another
// program, another opemu with another prefix) move etcd's revision but reach no watch here. The
// key is inside the watched range, so its event arrives in order after every earlier write and
// brings the cache to a revision at least as new as the read asked for. (etcd's own answer to
// this, a progress request on the watch stream, can overtake events still queued on it in etcd
// before 3.4.31 and 3.5.13, the versions Debian ships among them.)

func (s *Store) progressKey() string { return s.keys.prefix + "/progress" }

// progress coalesces the progress writes of concurrent readers.
type progress struct {
	// mu guards inflight and modRev.
	mu       sync.Mutex
	inflight *progressCall
	modRev   int64 // the key's mod_revision as last seen
}

type progressCall struct {
	done chan struct{}
	rev  int64
	err  error
}

// writeProgress writes the progress key and returns the revision of the write; a caller that
// finds a write in flight shares its result (its revision may predate the caller's read, which
// then writes again).
func (s *Store) writeProgress(ctx context.Context) (int64, error) {
	p := &s.progress
	p.mu.Lock()
	if call := p.inflight; call != nil {
		p.mu.Unlock()
		select {
		case <-call.done:
			return call.rev, call.err
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
	call := &progressCall{done: make(chan struct{})}
	p.inflight = call
	modRev := p.modRev
	p.mu.Unlock()

	key := s.progressKey()
	for attempt := 0; attempt < 3; attempt++ {
		cctx, cancel := s.callCtx(ctx)
		resp, err := s.client.Txn(cctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", modRev)).
			Then(clientv3.OpPut(key, s.cfg.Identity)).Else(clientv3.OpGet(key)).Commit()
		cancel()
		if err != nil {
			call.err = s.fail("progress write", cache.Key{}, err)
			break
		}
		if resp.Succeeded {
			call.rev, modRev, call.err = resp.Header.Revision, resp.Header.Revision, nil
			break
		}
		modRev = 0
		if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
			modRev = rr.Kvs[0].ModRevision
		}
	}
	p.mu.Lock()
	p.inflight, p.modRev = nil, modRev
	p.mu.Unlock()
	close(call.done)
	return call.rev, call.err
}
