package etcd

import (
	"context"
	"errors"
	"sync"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Group commit (on unless Config.SingleWrites): concurrent creates that carry a TTL (Events, written in
// bursts after the writes they record) are coalesced into one etcd transaction, each key
// guarded by its own comparison:
//
//	If(mod_revision(k1) == 0, …, mod_revision(kn) == 0) Then(Put(k1, v1, lease), …, Put(kn, vn, lease))
//
// A create that finds no batch in flight leads one at once with whatever is queued (no added
// latency when there is nothing to batch with); creates arriving while a batch is in flight
// queue up and the first of them leads the next batch when it ends. A batch holds at most
// maxBatchOps creates and maxBatchBytes of values, below etcd's default limits (128 operations
// per transaction, 1.5 MiB per request). When the combined comparison fails (a key exists) or
// the endpoint refuses the transaction, every create of the batch is made again on its own, so
// each caller gets its own answer (AlreadyExists for the key that existed, success for the
// others). An endpoint that refuses combined transactions (kine) while accepting the single
// ones is not sent any more of them.
//
// What it changes: the creates of one batch get the same etcd revision, hence the same
// resourceVersion, and arrive in the watch cache together, in the order of the transaction. A
// watch resuming at that version gets all of them again (cache.WatchOptions.ResourceVersion),
// so a watcher cut off between two of them loses none.

// Limits of one batch, below etcd's defaults (--max-txn-ops 128, --max-request-bytes 1.5 MiB).
const (
	maxBatchOps   = 64
	maxBatchBytes = 1 << 20
)

// batcher coalesces concurrent TTL creates; see above.
type batcher struct {
	s *Store

	// mu guards queue, inFlight and refused.
	mu       sync.Mutex
	queue    []*batched
	inFlight bool // a batch is being written; its leader starts the next one
	refused  bool // the endpoint refused a combined transaction that single ones then passed
}

// batched is one create waiting in, or written by, a batch.
type batched struct {
	ekey string
	put  clientv3.Op
	size int

	// wake is closed when the create's answer is in (rev, ok, err), or when it is to lead
	// the batch lead.
	wake chan struct{}
	lead []*batched

	rev int64 // the revision of the transaction that made it (ok) or answered it
	ok  bool  // created; false with a nil err: the key existed
	err error // the transaction failed (the caller maps it with Store.fail)
}

// create makes one create transaction for ekey with put (its value size bytes long), batched
// with the concurrent ones. It returns the revision and whether the key was created, or the
// etcd error.
func (b *batcher) create(ctx context.Context, ekey string, put clientv3.Op, size int) (int64, bool, error) {
	me := &batched{ekey: ekey, put: put, size: size, wake: make(chan struct{})}
	b.mu.Lock()
	if b.refused || size > maxBatchBytes {
		b.mu.Unlock()
		return b.single(ctx, me)
	}
	if b.inFlight {
		b.queue = append(b.queue, me)
		b.mu.Unlock()
		<-me.wake // bounded: the batch in flight and this one are bounded by RequestTimeout
		if me.lead == nil {
			return me.rev, me.ok, me.err
		}
	} else {
		b.inFlight = true
		b.mu.Unlock()
		me.lead = []*batched{me}
	}
	b.run(ctx, me.lead)
	return me.rev, me.ok, me.err
}

// run writes batch (led by its first create, whose context is ctx), answers each of its
// creates, then hands the next batch (what queued meanwhile) to its first create, or ends
// the flight.
func (b *batcher) run(ctx context.Context, batch []*batched) {
	b.commit(ctx, batch)
	b.mu.Lock()
	next := b.takeLocked()
	if len(next) == 0 {
		b.inFlight = false
	}
	b.mu.Unlock()
	for _, c := range batch {
		if c != batch[0] {
			close(c.wake)
		}
	}
	if len(next) > 0 {
		next[0].lead = next
		close(next[0].wake)
	}
}

// takeLocked takes the next batch off the queue: at most maxBatchOps creates and
// maxBatchBytes of values.
func (b *batcher) takeLocked() []*batched {
	n, bytes := 0, 0
	for n < len(b.queue) && n < maxBatchOps && (n == 0 || bytes+b.queue[n].size <= maxBatchBytes) {
		bytes += b.queue[n].size
		n++
	}
	batch := b.queue[:n:n]
	b.queue = b.queue[n:]
	if len(b.queue) == 0 {
		b.queue = nil // let the backing array go
	}
	return batch
}

// commit writes batch as one transaction, or each create on its own when it holds one, when
// the combined comparison failed or when the endpoint refused the transaction. ctx is the
// leader's: it bounds the leader's own write alone; a combined one is bounded by
// RequestTimeout only, since the leader's caller going away must not fail the others.
func (b *batcher) commit(ctx context.Context, batch []*batched) {
	if len(batch) == 1 {
		b.single(ctx, batch[0])
		return
	}
	cmps := make([]clientv3.Cmp, len(batch))
	puts := make([]clientv3.Op, len(batch))
	for i, c := range batch {
		cmps[i] = clientv3.Compare(clientv3.ModRevision(c.ekey), "=", 0)
		puts[i] = c.put
	}
	cctx, cancel := b.s.callCtx(context.Background())
	resp, err := b.s.client.Txn(cctx).If(cmps...).Then(puts...).Commit()
	cancel()
	if err == nil && resp.Succeeded {
		for _, c := range batch {
			c.rev, c.ok = resp.Header.Revision, true
		}
		return
	}
	// One by one, concurrently: each gets its own answer.
	var wg sync.WaitGroup
	for _, c := range batch {
		wg.Go(func() { b.single(context.Background(), c) })
	}
	wg.Wait()
	if err != nil && refusal(err) {
		all := true
		for _, c := range batch {
			all = all && c.err == nil
		}
		if all {
			b.mu.Lock()
			b.refused = true
			b.mu.Unlock()
			b.s.log.Warn("etcd: the endpoint refused a transaction of several creates; writing them one by one from now on", "err", err)
		}
	}
}

// single writes c's create on its own (the shape of Store.Create) and records its answer.
func (b *batcher) single(ctx context.Context, c *batched) (int64, bool, error) {
	cctx, cancel := b.s.callCtx(ctx)
	resp, err := b.s.client.Txn(cctx).If(clientv3.Compare(clientv3.ModRevision(c.ekey), "=", 0)).Then(c.put).Commit()
	cancel()
	c.err = err
	if err == nil {
		c.rev, c.ok = resp.Header.Revision, resp.Succeeded
	}
	return c.rev, c.ok, c.err
}

// refusal says whether err, from a combined transaction, may be the endpoint refusing its
// shape rather than etcd being slow, away or the values too large, after which the same
// creates went through one by one.
func refusal(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, rpctypes.ErrRequestTooLarge) {
		return false
	}
	switch status.Code(err) {
	case codes.DeadlineExceeded, codes.Canceled, codes.Unavailable, codes.ResourceExhausted:
		return false
	}
	return true
}
