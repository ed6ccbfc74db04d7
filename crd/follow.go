package crd

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/opemu/opemu/cache"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Replicas over a shared store (SPEC §12) each serve the kinds of every stored CRD, whichever
// replica stored it: Load registers what is stored at start, Follow keeps up with the CRDs
// written through other replicas. Both are idempotent with this replica's own writes (the
// lifecycle registers on the write path too): a CRD older than the registered one (by
// resourceVersion) is never registered over it.

// Load registers the kinds of every CRD stored in store and returns the version it read at.
// A stored CRD that does not register (it became invalid) is logged and skipped.
func (r *Registry) Load(ctx context.Context, store cache.Interface, log *slog.Logger) (uint64, error) {
	res, err := store.List(ctx, Resource)
	if err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	for _, o := range res.Items {
		seen[o.Key().Name] = true
		r.follow(o, log)
	}
	for _, c := range r.CRDs() {
		if !seen[c.Name] && !r.IsBuiltIn(c.Name) {
			_ = r.Unregister(c.Name)
		}
	}
	return res.ResourceVersion, nil
}

// Follow serves the kinds of CRDs created, changed and deleted through other replicas, from
// version rv (Load's), until ctx ends. A deleted CRD's kinds stop being served and this
// replica's watches of them end (endWatches). When its watch cannot go on (the store re-listed)
// it loads every CRD again.
func (r *Registry) Follow(ctx context.Context, store cache.Interface, rv uint64, endWatches func(cache.GroupResource), log *slog.Logger) error {
	for ctx.Err() == nil {
		w, err := store.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{Resource}, ResourceVersion: rv})
		if err == nil {
			for ev := range w.Events() {
				rv = ev.ResourceVersion
				if ev.Type == cache.Deleted {
					r.forget(ev.Object, endWatches)
				} else {
					r.follow(ev.Object, log)
				}
			}
			err = w.Err()
		}
		if ctx.Err() != nil {
			return nil
		}
		log.Info("crd: following CRDs again from the store", "reason", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(100 * time.Millisecond):
		}
		if rv, err = r.Load(ctx, store, log); err != nil {
			rv = 0
		}
	}
	return nil
}

func (r *Registry) follow(o *cache.Object, log *slog.Logger) {
	if r.IsBuiltIn(o.Key().Name) {
		return
	}
	var c apiextv1.CustomResourceDefinition
	if err := json.Unmarshal(o.Raw(), &c); err != nil {
		log.Warn("crd: a stored CRD does not decode", "name", o.Key().Name, "err", err)
		return
	}
	if _, errs, err := r.serve(&c); err != nil || len(errs) > 0 {
		log.Warn("crd: a stored CRD does not register", "name", c.Name, "err", errors.Join(err, errs.ToAggregate()))
	}
}

func (r *Registry) forget(o *cache.Object, endWatches func(cache.GroupResource)) {
	c, ok := r.CRD(o.Key().Name)
	if !ok || r.IsBuiltIn(c.Name) {
		return
	}
	if stored := rvOf(cacheRV(o)); stored != 0 && rvOf(c.ResourceVersion) > stored {
		return // a newer CRD of that name is registered
	}
	if r.Unregister(c.Name) == nil && endWatches != nil {
		endWatches(cache.GroupResource{Group: c.Spec.Group, Resource: c.Spec.Names.Plural})
	}
}

func cacheRV(o *cache.Object) string { return strconv.FormatUint(o.ResourceVersion(), 10) }

// rvOf parses a resourceVersion; 0 when there is none.
func rvOf(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}
