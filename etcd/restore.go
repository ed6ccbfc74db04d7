package etcd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/opemu/opemu/cache"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A restore replaces everything under the prefix with a snapshot's objects. etcd takes at most
// 128 operations and 1.5 MiB in one transaction (its defaults), so a snapshot of any size is
// written in several; every replica must still see it as one change, never half of it. The
// restore key, <prefix>/restore, brackets it:
//
//	begin:  If(create_revision(restore) == 0) Then(Put(restore, lease), Delete(every key under the prefix but it))
//	write:  Put(k1, v1), Put(k2, v2), ...            (transactions of at most restoreBatchOps and restoreBatchBytes)
//	end:    Delete(restore)
//
// A replica's feed that sees the restore key written stops applying what follows (its readers
// keep the state from before, which is still the truth until the end); when it sees the key
// deleted it lists the prefix again and refills its watch cache with what is there, closing
// every watcher with ErrGone (cache.WatchCache.Restored). A restorer that dies half-way leaves
// the key to its lease (restoreLease): when it expires the replicas list what was written. A
// list that finds the key waits for it to go (a restore in progress is never half-served).
// Another restore while one runs is refused (ErrConflict). Writes through other replicas during
// a restore are not refused: they land in etcd and survive it, or are overwritten by it.

const (
	restoreBatchOps   = 100
	restoreBatchBytes = 1 << 20
	// restoreLease bounds how long a restorer that died half-way holds the replicas' caches.
	restoreLease = 60 * time.Second
)

// errRestoring: a list found a restore in progress.
var errRestoring = errors.New("etcd: a restore is in progress under the prefix")

func (s *Store) restoreKey() string { return s.keys.prefix + "/restore" }

// Encode encodes obj as etcd keeps it (without metadata.resourceVersion), for Restore.
func (s *Store) Encode(key cache.Key, obj map[string]any) (*cache.Object, error) {
	if key.Name == "" {
		return nil, &cache.Error{Err: cache.ErrInvalid, Key: key, Field: "metadata.name", Message: "name or generateName is required"}
	}
	return s.c.Encode(key, obj)
}

// Restore replaces everything under the prefix with objects (see cache.Interface and the
// restore key above), giving Events the etcd lease of their TTL (opts.TTL). It returns once
// this replica's cache holds the restored state, at the version it does.
func (s *Store) Restore(ctx context.Context, objects []*cache.Object, opts cache.RestoreOptions) (uint64, error) {
	if s.closed.Load() {
		return 0, &cache.Error{Err: cache.ErrClosed}
	}
	if err := cache.CheckRestore(objects); err != nil {
		return 0, err
	}
	puts := make([]clientv3.Op, 0, len(objects))
	sizes := make([]int, 0, len(objects))
	for _, o := range objects {
		obj, err := o.Decode()
		if err != nil {
			return 0, &cache.Error{Err: cache.ErrInvalid, Key: o.Key(), Message: err.Error()}
		}
		value, err := s.c.Encode(o.Key(), obj)
		if err != nil {
			return 0, err
		}
		var ttl time.Duration
		if opts.TTL != nil {
			ttl = opts.TTL(o.Key().GroupResource())
		}
		put, err := s.putOp(ctx, s.keys.of(o.Key()), value, cache.WriteOptions{TTL: ttl})
		if err != nil {
			return 0, err
		}
		puts, sizes = append(puts, put), append(sizes, len(value.Raw()))
	}

	marker := s.restoreKey()
	cctx, cancel := s.callCtx(ctx)
	lease, err := s.client.Grant(cctx, int64(restoreLease/time.Second))
	cancel()
	if err != nil {
		return 0, s.fail("restore", cache.Key{}, err)
	}
	root := s.keys.root()
	begin := []clientv3.Op{
		clientv3.OpPut(marker, s.cfg.Identity, clientv3.WithLease(lease.ID)),
		clientv3.OpDelete(root, clientv3.WithRange(marker)),
		clientv3.OpDelete(marker+"\x00", clientv3.WithRange(clientv3.GetPrefixRangeEnd(root))),
	}
	cctx, cancel = s.callCtx(ctx)
	resp, err := s.client.Txn(cctx).If(clientv3.Compare(clientv3.CreateRevision(marker), "=", 0)).Then(begin...).Commit()
	cancel()
	switch {
	case err != nil:
		return 0, s.fail("restore", cache.Key{}, err)
	case !resp.Succeeded:
		return 0, &cache.Error{Err: cache.ErrConflict, Message: "another restore is in progress under " + s.keys.prefix}
	}
	// From here on, a failure leaves the replicas to the lease: they list what was written.
	for start := 0; start < len(puts); {
		end, bytes := start, 0
		for end < len(puts) && end-start < restoreBatchOps && (end == start || bytes+sizes[end] <= restoreBatchBytes) {
			bytes += sizes[end]
			end++
		}
		cctx, cancel := s.callCtx(ctx)
		_, err := s.client.Txn(cctx).Then(puts[start:end]...).Commit()
		cancel()
		if err != nil {
			return 0, s.fail("restore", objects[start].Key(), err)
		}
		start = end
	}
	cctx, cancel = s.callCtx(ctx)
	resp, err = s.client.Txn(cctx).Then(clientv3.OpDelete(marker)).Commit()
	cancel()
	if err != nil {
		return 0, s.fail("restore", cache.Key{}, err)
	}
	cctx, cancel = s.callCtx(ctx)
	_, _ = s.client.Revoke(cctx, lease.ID)
	cancel()
	wctx, cancel := s.freshCtx(ctx)
	defer cancel()
	if err := s.c.WaitUntil(wctx, uint64(resp.Header.Revision)); err != nil {
		return 0, &cache.Error{Err: cache.ErrTimeout, Message: fmt.Sprintf("etcd: the restore is written (revision %d) but this replica's watch cache has not refilled yet: %v", resp.Header.Revision, err)}
	}
	return s.c.ResourceVersion(), nil
}
