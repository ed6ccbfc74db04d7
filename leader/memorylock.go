package leader

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"sync"

	"github.com/opemu/opemu/cache"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaseResource is where Leases are stored.
var LeaseResource = cache.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}

// MemoryLock keeps the lease as a coordination/v1 Lease in this process's store (a valid
// LeaseSpec, see record.leaseSpec), with the store's optimistic concurrency (it is client-go's
// LeaseLock, against the local store).
type MemoryLock struct {
	Client    Client
	Namespace string
	Name      string
	ID        string
	OnRecord  func(msg string)

	mu sync.Mutex
	rv string // resourceVersion of the Lease this lock last read or wrote
}

var _ rl.Interface = (*MemoryLock)(nil)

func (l *MemoryLock) key() cache.Key {
	return cache.Key{Group: LeaseResource.Group, Resource: LeaseResource.Resource, Namespace: l.Namespace, Name: l.Name}
}

func (l *MemoryLock) remember(o *cache.Object) {
	l.mu.Lock()
	l.rv = strconv.FormatUint(o.ResourceVersion(), 10)
	l.mu.Unlock()
}

// Get returns the Lease's record; the raw bytes are its spec.
func (l *MemoryLock) Get(ctx context.Context) (*rl.LeaderElectionRecord, []byte, error) {
	o, err := l.Client.Get(ctx, l.key())
	if errors.Is(err, cache.ErrNotFound) {
		return nil, nil, apierrors.NewNotFound(leaseResource, l.Name)
	}
	if err != nil {
		return nil, nil, err
	}
	obj, err := o.Decode()
	if err != nil {
		return nil, nil, err
	}
	raw, _ := json.Marshal(obj["spec"])
	l.remember(o)
	return recordFromLeaseSpec(raw).election(), raw, nil
}

func (l *MemoryLock) lease(ler rl.LeaderElectionRecord, rv string) map[string]any {
	spec := toRecord(ler).leaseSpec()
	md := map[string]any{"name": l.Name, "namespace": l.Namespace}
	if rv != "" {
		md["resourceVersion"] = rv
	}
	return map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": md, "spec": spec}
}

// Create stores a new Lease; AlreadyExists if another candidate created it first.
func (l *MemoryLock) Create(ctx context.Context, ler rl.LeaderElectionRecord) error {
	o, err := l.Client.Create(ctx, l.key(), l.lease(ler, ""))
	if errors.Is(err, cache.ErrAlreadyExists) {
		return apierrors.NewAlreadyExists(leaseResource, l.Name)
	}
	if err != nil {
		return err
	}
	l.remember(o)
	return nil
}

// Update writes the Lease if it is still the version this lock last saw.
func (l *MemoryLock) Update(ctx context.Context, ler rl.LeaderElectionRecord) error {
	l.mu.Lock()
	rv := l.rv
	l.mu.Unlock()
	if rv == "" {
		return errors.New("leader: update before the lease was read")
	}
	o, err := l.Client.Update(ctx, l.key(), l.lease(ler, rv))
	if errors.Is(err, cache.ErrConflict) {
		return apierrors.NewConflict(leaseResource, l.Name, err)
	}
	if err != nil {
		return err
	}
	l.remember(o)
	return nil
}

// Peek reads the record without taking part in the election (it does not move the version
// Update checks against).
func (l *MemoryLock) Peek(ctx context.Context) (record, bool) {
	o, err := l.Client.Get(ctx, l.key())
	if err != nil {
		return record{}, false
	}
	obj, err := o.Decode()
	if err != nil {
		return record{}, false
	}
	raw, _ := json.Marshal(obj["spec"])
	return recordFromLeaseSpec(raw), true
}

// RecordEvent reports an election event.
func (l *MemoryLock) RecordEvent(s string) {
	if l.OnRecord != nil {
		l.OnRecord(s)
	}
}

// Identity is this candidate's identity.
func (l *MemoryLock) Identity() string { return l.ID }

// Describe names the lock.
func (l *MemoryLock) Describe() string { return l.Namespace + "/" + l.Name }
