package etcd

import (
	"context"
	"errors"
	"sort"

	"github.com/opemu/opemu/cache"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Every write is one etcd transaction in the shapes kube-apiserver's etcd3 store issues, which
// kine (k3s' etcd shim) also recognises:
//
//	create: If(mod_revision(key) == 0)   Then(Put(key, value[, lease]))
//	update: If(mod_revision(key) == rev) Then(Put(key, value[, lease])) Else(Get(key))
//	delete: If(mod_revision(key) == rev) Then(Delete(key))              Else(Get(key))
//
// rev is the mod_revision of the state the write was decided on, so a write never overwrites
// one it did not see: a failed comparison hands back the current state (Else), and
// GuaranteedUpdate decides again from it.

// Create stores obj at key (see cache.Interface): one create transaction, shared with
// concurrent creates that carry a TTL too unless Config.SingleWrites is set (batch.go). It
// returns once this replica's cache holds the write.
func (s *Store) Create(ctx context.Context, key cache.Key, obj map[string]any, opts cache.WriteOptions) (*cache.Object, error) {
	if s.closed.Load() {
		return nil, &cache.Error{Err: cache.ErrClosed, Key: key}
	}
	if key.Name == "" {
		return nil, &cache.Error{Err: cache.ErrInvalid, Key: key, Field: "metadata.name", Message: "name or generateName is required"}
	}
	next, err := s.c.Encode(key, obj)
	if err != nil {
		return nil, err
	}
	return s.create(ctx, key, next, opts)
}

var _ cache.EncodedCreator = (*Store)(nil)

// CreateEncoded is Create for an object its writer encoded (cache.Encoded: the recorder's
// Events), written as Create writes it. There is no dry run.
func (s *Store) CreateEncoded(ctx context.Context, key cache.Key, e cache.Encoded, opts cache.WriteOptions) (*cache.Object, error) {
	if s.closed.Load() {
		return nil, &cache.Error{Err: cache.ErrClosed, Key: key}
	}
	if key.Name == "" || opts.DryRun {
		return nil, &cache.Error{Err: cache.ErrInvalid, Key: key, Message: "cannot store this encoded object"}
	}
	next, err := s.c.EncodeEncoded(key, e)
	if err != nil {
		return nil, err
	}
	return s.create(ctx, key, next, opts)
}

// create writes next (encoded without its version) at key unless something is there.
func (s *Store) create(ctx context.Context, key cache.Key, next *cache.Object, opts cache.WriteOptions) (*cache.Object, error) {
	ekey := s.keys.of(key)
	if opts.DryRun {
		if _, err := s.read(ctx, key); err == nil {
			return nil, &cache.Error{Err: cache.ErrAlreadyExists, Key: key}
		} else if !errors.Is(err, cache.ErrNotFound) {
			return nil, err
		}
		return next, nil
	}
	put, err := s.putOp(ctx, ekey, next, opts)
	if err != nil {
		return nil, err
	}
	s.pending.Store(ekey, next)
	var (
		rev int64
		ok  bool
	)
	if !s.cfg.SingleWrites && opts.TTL > 0 {
		rev, ok, err = s.batch.create(ctx, ekey, put, len(next.Raw()))
	} else {
		cctx, cancel := s.callCtx(ctx)
		var resp *clientv3.TxnResponse
		resp, err = s.client.Txn(cctx).If(clientv3.Compare(clientv3.ModRevision(ekey), "=", 0)).Then(put).Commit()
		cancel()
		if err == nil {
			rev, ok = resp.Header.Revision, resp.Succeeded
		}
	}
	if err != nil || !ok {
		s.pending.CompareAndDelete(ekey, next)
		if err != nil {
			return nil, s.fail("create", key, err)
		}
		return nil, &cache.Error{Err: cache.ErrAlreadyExists, Key: key}
	}
	return s.committed(ctx, key, ekey, next, rev), nil
}

// GuaranteedUpdate updates or removes the object at key as try says (see cache.Interface). The
// first attempt starts from this replica's cache, which may lag etcd; when that stale state
// fails the preconditions or try, or makes the update a no-op, the current state is read from
// etcd and the attempt made again, as kube-apiserver does. A lost comparison starts the next
// attempt from the state etcd handed back.
func (s *Store) GuaranteedUpdate(ctx context.Context, key cache.Key, pre cache.Preconditions, try cache.UpdateFunc, opts cache.WriteOptions) (*cache.Object, error) {
	if s.closed.Load() {
		return nil, &cache.Error{Err: cache.ErrClosed, Key: key}
	}
	ekey := s.keys.of(key)
	cur, err := s.c.Get(ctx, key)
	stale := err == nil // a cached state may be behind etcd
	if err != nil {
		if cur, err = s.read(ctx, key); err != nil {
			return nil, err
		}
	}
	// refresh reads the current state; retry says whether it differs from the one decided on.
	refresh := func() (retry bool, err error) {
		fresh, err := s.read(ctx, key)
		if err != nil {
			return false, err
		}
		stale = false
		if fresh.ResourceVersion() == cur.ResourceVersion() {
			return false, nil
		}
		cur = fresh
		return true, nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, s.fail("update", key, err)
		}
		if s.closed.Load() {
			return nil, &cache.Error{Err: cache.ErrClosed, Key: key}
		}
		if perr := pre.Check(key, cur); perr != nil {
			if stale {
				if _, err := refresh(); err != nil {
					return nil, err
				}
				continue
			}
			return nil, perr
		}
		u, terr := try(cur)
		if terr != nil {
			if stale {
				retry, err := refresh()
				if err != nil {
					return nil, err
				}
				if retry {
					continue
				}
			}
			return nil, terr
		}
		var next *cache.Object // the encoded next state, version 0 (nil: a removal)
		if u.Object != nil {
			if next, err = s.c.Encode(key, u.Object); err != nil {
				return nil, err
			}
		}
		noop := !u.Remove && (next == nil || cache.Unchanged(next, cur))
		if noop || opts.DryRun {
			if stale {
				retry, err := refresh()
				if err != nil {
					return nil, err
				}
				if retry {
					continue
				}
			}
			switch {
			case noop || u.Remove:
				return cur, nil
			}
			return s.c.AtVersion(next, cur.ResourceVersion())
		}
		rev := clientv3.Compare(clientv3.ModRevision(ekey), "=", int64(cur.ResourceVersion()))
		var then clientv3.Op
		if u.Remove {
			then = clientv3.OpDelete(ekey)
		} else {
			if then, err = s.putOp(ctx, ekey, next, opts); err != nil {
				return nil, err
			}
			s.pending.Store(ekey, next)
		}
		cctx, cancel := s.callCtx(ctx)
		resp, err := s.client.Txn(cctx).If(rev).Then(then).Else(clientv3.OpGet(ekey)).Commit()
		cancel()
		if err != nil || !resp.Succeeded {
			if next != nil {
				s.pending.CompareAndDelete(ekey, next)
			}
			if err != nil {
				return nil, s.fail("update", key, err)
			}
			if cur, err = s.fromElse(key, resp); err != nil {
				return nil, err
			}
			stale = false
			continue
		}
		if u.Remove {
			last := cur // the answer is the state the update gave, if it gave one (as the memory store's)
			if next != nil {
				last = next
			}
			return s.removed(ctx, key, last, resp.Header.Revision)
		}
		return s.committed(ctx, key, ekey, next, resp.Header.Revision), nil
	}
}

// Delete removes the object at key if pre holds (see cache.Interface): one delete transaction
// guarded by the revision of the state pre was checked on.
func (s *Store) Delete(ctx context.Context, key cache.Key, pre cache.Preconditions, opts cache.WriteOptions) (*cache.Object, error) {
	return s.GuaranteedUpdate(ctx, key, pre, func(*cache.Object) (cache.Update, error) {
		return cache.Update{Remove: true}, nil
	}, opts)
}

// DropResource deletes every object of gr (a delete transaction each, in key order) and then
// ends this replica's watches on gr alone. It returns how many objects went.
func (s *Store) DropResource(ctx context.Context, gr cache.GroupResource) (int, error) {
	if s.closed.Load() {
		return 0, &cache.Error{Err: cache.ErrClosed, Key: cache.Key{Group: gr.Group, Resource: gr.Resource}}
	}
	res, err := s.c.List(ctx, gr)
	if err != nil {
		return 0, err
	}
	sort.Slice(res.Items, func(i, j int) bool {
		a, b := res.Items[i].Key(), res.Items[j].Key()
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	n := 0
	for _, o := range res.Items {
		_, err := s.Delete(ctx, o.Key(), cache.Preconditions{}, cache.WriteOptions{})
		switch {
		case errors.Is(err, cache.ErrNotFound):
		case err != nil:
			return n, err
		default:
			n++
		}
	}
	s.c.EndWatches(gr)
	return n, nil
}

// read reads the object at key from etcd (a linearizable read), not from the cache.
func (s *Store) read(ctx context.Context, key cache.Key) (*cache.Object, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	resp, err := s.client.Get(cctx, s.keys.of(key))
	if err != nil {
		return nil, s.fail("read", key, err)
	}
	if len(resp.Kvs) == 0 {
		return nil, &cache.Error{Err: cache.ErrNotFound, Key: key}
	}
	kv := resp.Kvs[0]
	return s.c.Stored(key, kv.Value, uint64(kv.ModRevision))
}

// fromElse returns the state a failed transaction handed back: its Else read (etcd), or the
// previous value of its delete (kine answers a failed conditional delete so).
func (s *Store) fromElse(key cache.Key, resp *clientv3.TxnResponse) (*cache.Object, error) {
	for _, r := range resp.Responses {
		var kvs []*mvccpb.KeyValue
		if rr := r.GetResponseRange(); rr != nil {
			kvs = rr.Kvs
		} else if dr := r.GetResponseDeleteRange(); dr != nil {
			kvs = dr.PrevKvs
		}
		if len(kvs) > 0 {
			return s.c.Stored(key, kvs[0].Value, uint64(kvs[0].ModRevision))
		}
	}
	return nil, &cache.Error{Err: cache.ErrNotFound, Key: key}
}

// putOp is the put of next at ekey, with the lease of opts.TTL when it has one.
func (s *Store) putOp(ctx context.Context, ekey string, next *cache.Object, opts cache.WriteOptions) (clientv3.Op, error) {
	if opts.TTL <= 0 {
		return clientv3.OpPut(ekey, string(next.Raw())), nil
	}
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	id, err := s.leases.get(cctx, opts.TTL)
	if err != nil {
		return clientv3.Op{}, s.fail("lease grant", next.Key(), err)
	}
	return clientv3.OpPut(ekey, string(next.Raw()), clientv3.WithLease(id)), nil
}

// committed returns the object a write made at rev once this replica's cache holds it (the
// cache's own copy: the same bytes every replica holds). If the cache does not get there
// within FreshTimeout (its watch is broken) the write still happened: its object is returned
// all the same.
func (s *Store) committed(ctx context.Context, key cache.Key, ekey string, next *cache.Object, rev int64) *cache.Object {
	wctx, cancel := s.freshCtx(ctx)
	err := s.c.WaitUntil(wctx, uint64(rev))
	cancel()
	s.pending.CompareAndDelete(ekey, next)
	if err == nil {
		if o, gerr := s.c.Get(ctx, key); gerr == nil && o.ResourceVersion() == uint64(rev) {
			return o
		}
	} else if ctx.Err() == nil {
		s.log.Warn("etcd: a write is committed but this replica's cache has not seen it yet", "key", key.String(), "revision", rev, "err", err)
	}
	o, err := s.c.AtVersion(next, uint64(rev))
	if err != nil {
		return next
	}
	return o
}

// removed is what a removal at rev returns: last, the object's last state (the one the update
// gave, else the stored one, which its DELETED event carries), as of rev, once this replica's
// cache has seen the removal.
func (s *Store) removed(ctx context.Context, key cache.Key, last *cache.Object, rev int64) (*cache.Object, error) {
	wctx, cancel := s.freshCtx(ctx)
	if err := s.c.WaitUntil(wctx, uint64(rev)); err != nil && ctx.Err() == nil {
		s.log.Warn("etcd: a removal is committed but this replica's cache has not seen it yet", "key", key.String(), "revision", rev, "err", err)
	}
	cancel()
	return s.c.AtVersion(last, uint64(rev))
}
