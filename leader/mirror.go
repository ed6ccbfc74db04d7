package leader

import (
	"context"
	"errors"

	"github.com/opemu/opemu/cache"
)

// mirror copies the file backend's record into the store as the Lease
// LeaseNamespace/LeaseName every RetryPeriod, so kubectl and watches see it. Clients may not
// write it (the server answers 403); only this loop does.
func (e *Elector) mirror(ctx context.Context) {
	key, _ := e.MirrorKey()
	t := e.cfg.Clock.NewTicker(e.cfg.RetryPeriod)
	defer t.Stop()
	for {
		if r, ok := e.file.Peek(); ok {
			e.writeMirror(ctx, key, r)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
	}
}

func (e *Elector) writeMirror(ctx context.Context, key cache.Key, r record) {
	obj := map[string]any{
		"apiVersion": "coordination.k8s.io/v1",
		"kind":       "Lease",
		"metadata":   map[string]any{"name": key.Name, "namespace": key.Namespace, "labels": map[string]any{"opemu.dev/mirror": "file"}},
		"spec":       r.leaseSpec(),
	}
	_, err := e.cfg.Client.Update(ctx, key, obj)
	if errors.Is(err, cache.ErrNotFound) {
		_, err = e.cfg.Client.Create(ctx, key, obj)
	}
	if err != nil && !errors.Is(err, cache.ErrClosed) && ctx.Err() == nil {
		e.cfg.Logger.Debug("mirroring the lease", "err", err)
	}
}
