package etcd

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// RunCompaction compacts etcd's history every interval until ctx ends, as kube-apiserver's
// compactor does: at each tick it compacts at the revision it saw at the previous tick, so
// etcd keeps between one and two intervals of history. The watch histories clients resume from
// live in each replica's memory (cache.Config.WatchHistory), not in etcd; what etcd's history
// serves is a replica's feed resuming its watch after a break, and a break shorter than an
// interval never needs a re-list. Only the leader runs it. An endpoint that compacts by itself
// and refuses the request (kine) is left to do so.
func (s *Store) RunCompaction(ctx context.Context, interval time.Duration) error {
	if interval <= 0 {
		return nil
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var last uint64
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		cur, err := s.currentRevision(ctx)
		if err != nil {
			s.log.Warn("etcd: compaction skipped", "err", err)
			continue
		}
		if last > 0 {
			if err := s.Compact(ctx, last); err != nil {
				if status.Code(err) == codes.Unimplemented {
					s.log.Info("etcd: the endpoint does not take compaction requests; it compacts by itself", "err", err)
					return nil
				}
				s.log.Warn("etcd: compaction failed", "revision", last, "err", err)
			} else {
				s.log.Debug("etcd: compacted", "revision", last)
			}
		}
		last = cur
	}
}

// Compact compacts etcd's history up to rev (exclusive): a watch or read from an older
// revision fails from then on. A revision already compacted is not an error.
func (s *Store) Compact(ctx context.Context, rev uint64) error {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	_, err := s.client.Compact(cctx, int64(rev))
	if errors.Is(err, rpctypes.ErrCompacted) {
		return nil
	}
	return err
}
