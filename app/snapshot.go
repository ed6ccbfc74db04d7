package app

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/leader"
	"github.com/opemu/opemu/snapshot"
)

// Snapshots (SPEC §23): the server's state taken whole (Snapshot), and replaced whole by a
// snapshot's (Restore, and Config.Load at start). A restore is a start from that state without
// a new process: the store is replaced in one change (its watchers end with a 410, so every
// informer, the controllers' among them, lists again and requeues everything), the served CRDs
// follow the stored ones, the recorder counts the Events it finds, the cluster's own objects
// the snapshot lacks are made again as at a start (system namespaces, built-in CRDs,
// Config.Objects, the Nodes, the kubernetes Service), and a manual clock goes to the
// snapshot's time.

// Snapshot takes the server's state: every object but the elector's Lease (the running
// server's, never a snapshot's), and the clock.
func (a *App) Snapshot(ctx context.Context) (*snapshot.Snapshot, error) {
	s, err := snapshot.Take(ctx, a.store, a.own)
	if err != nil {
		return nil, err
	}
	_, s.ManualClock = a.clock.(clockSetter)
	s.Clock = a.clock.Now()
	return s, nil
}

// clockSetter is a manual clock that can be set (k8s.io/utils/clock/testing's FakeClock).
type clockSetter interface {
	SetTime(time.Time)
}

// scheduleForgetter is a reconciler that keeps when each object's next step is due and can
// forget it: times on a clock that was set back would hold objects back by the difference.
type scheduleForgetter interface {
	ForgetSchedules()
}

// Restore replaces the server's state with s's (see above). Bad objects in s are a 400 or 422
// Status naming one, and nothing changes. One restore runs at a time.
func (a *App) Restore(ctx context.Context, s *snapshot.Snapshot, opts snapshot.RestoreOptions) (snapshot.Restored, error) {
	a.restoring.Lock()
	defer a.restoring.Unlock()
	return a.restore(ctx, s, opts)
}

func (a *App) restore(ctx context.Context, s *snapshot.Snapshot, opts snapshot.RestoreOptions) (snapshot.Restored, error) {
	checker := snapshot.Checker{Store: a.store, Kinds: a.served, CRDs: a.crds, Now: a.clock.Now}
	objects, err := checker.Objects(s, a.own)
	if err != nil {
		return snapshot.Restored{}, err
	}
	for _, key := range a.ownKeys() {
		if o, err := a.store.Get(ctx, key); err == nil {
			objects = append(objects, o) // the server's own, as it is now
		}
	}
	// The leader's work stops (each worker finishes its item) and starts again from a full
	// list once the store holds the snapshot: nothing is decided on the state it replaces.
	resume := a.terms.pause()
	defer resume()
	setter, manual := a.clock.(clockSetter)
	setClock := manual && s.ManualClock && !s.Clock.IsZero() && !opts.KeepClock
	if setClock {
		// Before the store: whatever the controllers schedule in their next term is on the
		// restored clock. What they remember was on the old one.
		setter.SetTime(s.Clock)
		for _, f := range a.schedules {
			f.ForgetSchedules()
		}
	}
	rv, err := a.store.Restore(ctx, objects, cache.RestoreOptions{TTL: a.ttl})
	if err != nil {
		return snapshot.Restored{}, err
	}
	eventKind, _ := a.served.Resource(events.Resource)
	if err := a.recorder.Resync(ctx, eventKind); err != nil {
		return snapshot.Restored{}, fmt.Errorf("app: after the restore: %w", err)
	}
	if err := a.settle(ctx); err != nil {
		return snapshot.Restored{}, fmt.Errorf("app: after the restore: %w", err)
	}
	if a.apiService.client != nil {
		// Running: the kubernetes Service points at this listener again (the snapshot may come
		// from another server).
		if err := a.apiService.ensure(ctx, a.etcd == nil); err != nil {
			return snapshot.Restored{}, fmt.Errorf("app: after the restore: the kubernetes Service: %w", err)
		}
	}
	n := 0
	for _, c := range a.store.Counts() {
		n += c.Count
	}
	a.log.Info("restored a snapshot", "objects", n, "resourceVersion", rv, "clockRestored", setClock)
	return snapshot.Restored{
		Objects: n, ResourceVersion: strconv.FormatUint(rv, 10),
		Clock: a.clock.Now().UTC().Format(time.RFC3339Nano), ClockRestored: setClock,
	}, nil
}

// ttl is how long the objects of gr live after a write (their kind's TTL: Events', which etcd
// keeps with a lease); zero for ever.
func (a *App) ttl(gr cache.GroupResource) time.Duration {
	if k, ok := a.served.Resource(gr); ok {
		return k.TTL
	}
	return 0
}

// ownKeys are the objects the running server owns, which a snapshot never holds and a restore
// keeps as they are: the elector's Lease (its record of who leads now).
func (a *App) ownKeys() []cache.Key {
	if a.elector == nil {
		return nil
	}
	return []cache.Key{{Group: leader.LeaseResource.Group, Resource: leader.LeaseResource.Resource, Namespace: a.elector.LeaseNamespace(), Name: a.elector.LeaseName()}}
}

// own reports whether key is one of ownKeys.
func (a *App) own(key cache.Key) bool {
	for _, k := range a.ownKeys() {
		if k == key {
			return true
		}
	}
	return false
}
