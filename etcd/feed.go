package etcd

import (
	"bytes"
	"context"
	"errors"
	"runtime"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The feed: the cache is filled by one list of the prefix at one revision, then kept current by
// one watch of the prefix from the next revision, as kube-apiserver's cacher does. The events
// of the watch are applied in etcd's order at etcd's revisions. When the watch breaks, it
// resumes from the last revision applied; when etcd compacted past it, the feed lists again
// and the cache's watchers are closed with a 410 (cache.WatchCache.Replace).

// pageSize is how many keys one range request of a list asks for.
const pageSize = 5000

var errCompacted = errors.New("etcd: the watch's revision was compacted")

// errRestored: the watch saw a restore end (restore.go); the cache lists again.
var errRestored = errors.New("etcd: a restore replaced everything under the prefix")

// list reads every object under the prefix at one revision, a page at a time, decoding each
// page on every core. It returns the objects and the revision they were read at.
func (s *Store) list(ctx context.Context) ([]*cache.Object, int64, error) {
	start := s.keys.root()
	end := clientv3.GetPrefixRangeEnd(start)
	var (
		rev  int64
		out  []*cache.Object
		last []byte
	)
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(end), clientv3.WithLimit(pageSize)}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		cctx, cancel := s.callCtx(ctx)
		resp, err := s.client.Get(cctx, start, opts...)
		cancel()
		if err != nil {
			return nil, 0, s.fail("list", cache.Key{}, err)
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		kvs := resp.Kvs
		for len(kvs) > 0 && last != nil && bytes.Compare(kvs[0].Key, last) <= 0 {
			kvs = kvs[1:] // an endpoint that repeats the page's start key (kine)
		}
		for _, kv := range kvs {
			if string(kv.Key) == s.restoreKey() {
				return nil, 0, errRestoring // listed again once it has ended
			}
		}
		out = append(out, s.decodeAll(kvs)...)
		if !resp.More || len(kvs) == 0 {
			return out, rev, nil
		}
		last = kvs[len(kvs)-1].Key
		start = string(last) + "\x00"
	}
}

// decodeAll decodes the objects among kvs, on every core. A value that does not decode is
// skipped with a warning: one bad value must not keep the replica from starting.
func (s *Store) decodeAll(kvs []*mvccpb.KeyValue) []*cache.Object {
	out := make([]*cache.Object, len(kvs))
	workers := min(runtime.GOMAXPROCS(0), 1+len(kvs)/500)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(kvs); i += workers {
				key, ok := s.keys.parse(kvs[i].Key)
				if !ok {
					continue
				}
				o, err := s.c.Stored(key, kvs[i].Value, uint64(kvs[i].ModRevision))
				if err != nil {
					s.log.Warn("etcd: skipping a value that does not decode", "key", string(kvs[i].Key), "err", err)
					continue
				}
				out[i] = o
			}
		})
	}
	wg.Wait()
	objs := out[:0]
	for _, o := range out {
		if o != nil {
			objs = append(objs, o)
		}
	}
	return objs
}

// run keeps the cache current from revision rev until ctx ends.
func (s *Store) run(ctx context.Context, rev int64) {
	defer close(s.done)
	backoff := 100 * time.Millisecond
	pause := func() {
		select {
		case <-ctx.Done():
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
	for ctx.Err() == nil {
		err := s.watch(ctx, rev)
		if ctx.Err() != nil {
			return
		}
		restored := errors.Is(err, errRestored)
		if !errors.Is(err, errCompacted) && !restored {
			rev = int64(s.c.ResourceVersion())
			s.log.Warn("etcd: the watch ended; resuming it", "revision", rev+1, "err", err)
			pause()
			continue
		}
		if restored {
			s.log.Info("etcd: a restore replaced everything under the prefix; listing again", "revision", s.c.ResourceVersion())
		} else {
			s.log.Warn("etcd: etcd compacted the history the watch needed; listing again", "revision", s.c.ResourceVersion())
		}
		for ctx.Err() == nil {
			objs, r, err := s.list(ctx)
			if err == nil {
				refill := s.c.Replace
				if restored {
					refill = s.c.Restored
				}
				if refill(objs, uint64(r)) != nil {
					return // closed
				}
				s.restoring = false
				s.relists.Add(1)
				rev = r
				backoff = 100 * time.Millisecond
				break
			}
			if !errors.Is(err, errRestoring) {
				s.log.Warn("etcd: listing again failed", "err", err)
			}
			pause()
		}
	}
}

// watch applies the events of one etcd watch from rev+1 until it breaks, and says why.
func (s *Store) watch(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := s.client.Watch(wctx, s.keys.root(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	var changes []cache.Change
	for resp := range wch {
		if resp.CompactRevision != 0 {
			return errCompacted
		}
		if err := resp.Err(); err != nil {
			if errors.Is(err, rpctypes.ErrCompacted) {
				return errCompacted
			}
			return err
		}
		if len(resp.Events) == 0 {
			continue // created, or a progress notification
		}
		changes = changes[:0]
		var skipped uint64 // the last revision passed over while a restore runs
		for _, ev := range resp.Events {
			if string(ev.Kv.Key) == s.restoreKey() {
				// A restore begins (its key is written) or ends (deleted, or its lease
				// expired): what came before it is applied; what follows the beginning
				// waits for the end, which lists everything again.
				rev := uint64(ev.Kv.ModRevision)
				if ev.Type != clientv3.EventTypeDelete {
					// The beginning's own deletions share its revision, whatever their order.
					for len(changes) > 0 && changes[len(changes)-1].ResourceVersion == rev {
						changes = changes[:len(changes)-1]
					}
				}
				if err := s.c.Apply(changes); err != nil {
					return err
				}
				changes = changes[:0]
				if ev.Type == clientv3.EventTypeDelete {
					return errRestored
				}
				s.restoring, skipped = true, rev
				continue
			}
			if s.restoring {
				skipped = uint64(ev.Kv.ModRevision)
				continue
			}
			changes = append(changes, s.change(ev))
		}
		if err := s.c.Apply(changes); err != nil {
			return err
		}
		if skipped != 0 {
			// Readers keep the state from before the restore, the truth until it ends.
			s.c.Advance(skipped)
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.New("etcd: the watch channel closed")
}

// change turns one etcd event into the cache's change. A key that is not an object's (the
// progress key) only moves the cache's revision.
func (s *Store) change(ev *clientv3.Event) cache.Change {
	rv := uint64(ev.Kv.ModRevision)
	key, ok := s.keys.parse(ev.Kv.Key)
	if !ok {
		return cache.Change{ResourceVersion: rv}
	}
	ch := cache.Change{Key: key, ResourceVersion: rv}
	if ev.Type == clientv3.EventTypeDelete {
		return ch
	}
	if p, ok := s.pending.Load(string(ev.Kv.Key)); ok {
		if enc := p.(*cache.Object); bytes.Equal(enc.Raw(), ev.Kv.Value) {
			if o, err := s.c.AtVersion(enc, rv); err == nil {
				ch.Object = o
				return ch
			}
		}
	}
	o, err := s.c.Stored(key, ev.Kv.Value, rv)
	if err != nil {
		s.log.Warn("etcd: skipping a value that does not decode", "key", string(ev.Kv.Key), "err", err)
		return cache.Change{ResourceVersion: rv}
	}
	ch.Object = o
	return ch
}
