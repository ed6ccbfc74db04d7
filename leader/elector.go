package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/metrics"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	rl "k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
)

// Backends.
const (
	BackendFile   = "file"
	BackendMemory = "memory"
	// BackendStore is the Lease in a store replicas share (etcd): the same lock as memory
	// (client-go's LeaseLock semantics over the in-process client), shared by every replica
	// because the store is.
	BackendStore = "store"
)

// Client is how the elector reads and writes Leases: the in-process API client
// (registry.Client), so the Lease it stores passes the same validation as a client's.
type Client interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	Create(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	Update(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
}

// Config configures an Elector. Identity and Client are required.
type Config struct {
	// Backend is BackendFile, BackendMemory or BackendStore. Empty means memory.
	Backend string
	// Lock, when set, replaces the backend's lock (tests; later an etcd or a cluster's Lease).
	Lock     rl.Interface
	Identity string
	// LeaseName and LeaseNamespace name the Lease. Empty means elide-operator-leader/default.
	LeaseName, LeaseNamespace string
	// LeaseFile is the file backend's record. Empty means <tmp>/opemu-<ns>-<name>.lease.
	LeaseFile string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's. Zero means 15 s, 10 s, 2 s. The
	// lease duration is at least 1 s (records state it in whole seconds).
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Client holds the memory backend's Lease and writes the file backend's read-only mirror.
	Client Client
	// OnStartedLeading runs while this process leads; its ctx is cancelled when leadership ends
	// or Run's ctx is done, and Run waits for it to return before releasing the lease.
	OnStartedLeading func(ctx context.Context)
	// OnEvent records "X became leader" style events on the Lease; may be nil.
	OnEvent func(reason, message string)
	Metrics *metrics.Registry
	Logger  *slog.Logger
	// Clock paces the file backend's mirror. Nil means the real clock. (client-go's elector
	// keeps its own real clock: leases are judged in real time.)
	Clock clock.WithTicker
}

// Elector runs client-go's leader election for this process.
type Elector struct {
	cfg  Config
	lock rl.Interface
	file *FileLock // nil for the memory backend
	term *term     // lock as client-go's elector uses it: knows how long this process leads

	leading atomic.Bool
	leader  atomic.Value // string: the holder last observed

	// mu guards stopWork.
	mu       sync.Mutex
	stopWork context.CancelFunc
}

// New validates cfg and builds the lock.
func New(cfg Config) (*Elector, error) {
	if cfg.Identity == "" || cfg.Client == nil {
		return nil, errors.New("leader: Identity and Client are required")
	}
	if cfg.LeaseName == "" {
		cfg.LeaseName = "elide-operator-leader"
	}
	if cfg.LeaseNamespace == "" {
		cfg.LeaseNamespace = "default"
	}
	if cfg.LeaseFile == "" {
		cfg.LeaseFile = filepath.Join(os.TempDir(), "opemu-"+cfg.LeaseNamespace+"-"+cfg.LeaseName+".lease")
	}
	if cfg.LeaseDuration <= 0 {
		cfg.LeaseDuration = 15 * time.Second
	}
	if cfg.RenewDeadline <= 0 {
		cfg.RenewDeadline = 10 * time.Second
	}
	if cfg.RetryPeriod <= 0 {
		cfg.RetryPeriod = 2 * time.Second
	}
	if cfg.LeaseDuration < time.Second {
		// The record states it in whole seconds: 0 s would make every lease expired to followers.
		return nil, fmt.Errorf("leader: the lease duration (%v) must be at least 1s", cfg.LeaseDuration)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	e := &Elector{cfg: cfg}
	e.leader.Store("")
	onRecord := func(msg string) {
		if cfg.OnEvent != nil {
			cfg.OnEvent("LeaderElection", cfg.Identity+" "+msg)
		}
	}
	switch cfg.Backend {
	case BackendFile:
		e.file = &FileLock{Path: cfg.LeaseFile, ID: cfg.Identity, Name: cfg.LeaseNamespace + "/" + cfg.LeaseName, Logger: cfg.Logger, OnRecord: onRecord,
			LeaseDuration: cfg.LeaseDuration}
		e.lock = e.file
	case BackendMemory, BackendStore, "":
		e.lock = &MemoryLock{Client: cfg.Client, Namespace: cfg.LeaseNamespace, Name: cfg.LeaseName, ID: cfg.Identity, OnRecord: onRecord}
	default:
		return nil, fmt.Errorf("leader: unknown backend %q", cfg.Backend)
	}
	if cfg.Lock != nil {
		e.lock, e.file = cfg.Lock, nil
	}
	e.term = &term{Interface: e.lock, renewDeadline: cfg.RenewDeadline}
	// Validate the timings the way client-go does, at start rather than at first run.
	if _, err := e.newElector(func(context.Context) {}); err != nil {
		return nil, err
	}
	return e, nil
}

// Backend is the backend in use (BackendFile, BackendMemory or BackendStore).
func (e *Elector) Backend() string {
	if e.file != nil {
		return BackendFile
	}
	if e.cfg.Backend == BackendStore {
		return BackendStore
	}
	return BackendMemory
}

// LeaseName and LeaseNamespace name the lease (defaults applied).
func (e *Elector) LeaseName() string { return e.cfg.LeaseName }

// LeaseNamespace is the lease's namespace (defaults applied).
func (e *Elector) LeaseNamespace() string { return e.cfg.LeaseNamespace }

// MirrorKey is the Lease the file backend mirrors into the store (read-only to clients); ok is
// false for the memory backend, whose Lease is the lock itself.
func (e *Elector) MirrorKey() (cache.Key, bool) {
	k := cache.Key{Group: LeaseResource.Group, Resource: LeaseResource.Resource, Namespace: e.cfg.LeaseNamespace, Name: e.cfg.LeaseName}
	return k, e.file != nil
}

// newElector builds one client-go elector (one per campaign: Run makes a new one after each
// lost term). It does not release the lease itself (ReleaseOnCancel): Run does, see release.
func (e *Elector) newElector(onStarted func(context.Context)) (*leaderelection.LeaderElector, error) {
	return leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          e.term,
		LeaseDuration: e.cfg.LeaseDuration,
		RenewDeadline: e.cfg.RenewDeadline,
		RetryPeriod:   e.cfg.RetryPeriod,
		Name:          e.cfg.LeaseNamespace + "/" + e.cfg.LeaseName,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: onStarted,
			OnStoppedLeading: func() {},
			OnNewLeader:      func(id string) { e.leader.Store(id) },
		},
	})
}

// Run takes part in the election until ctx is done. While this process leads it runs
// OnStartedLeading; when leadership is lost it stops that work and campaigns again. On ctx
// done it stops the work (waiting for it to return), then releases the lease, then returns.
//
// Each campaign (one client-go elector) runs under its own context, which the term ends as
// soon as the lease may no longer be this process's (see term): that stops the work then,
// not when client-go's renewal round gives up.
func (e *Elector) Run(ctx context.Context) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	if e.file != nil {
		wg.Go(func() { e.mirror(ctx) })
	}
	// The elector's own context outlives ctx until the work has stopped, so the lease is
	// released only after the last reconcile finished.
	elCtx, cancelEl := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelEl()
	var work sync.WaitGroup
	stopWork := func() {
		e.mu.Lock()
		if e.stopWork != nil {
			e.stopWork()
			e.stopWork = nil
		}
		e.mu.Unlock()
		work.Wait()
	}
	stop := context.AfterFunc(ctx, func() {
		stopWork()
		cancelEl()
	})
	defer stop()

	for elCtx.Err() == nil {
		campaign, endCampaign := context.WithCancel(elCtx)
		le, err := e.newElector(func(leCtx context.Context) {
			workCtx, cancel := context.WithCancel(leCtx)
			e.mu.Lock()
			if ctx.Err() != nil || leCtx.Err() != nil { // stopping, or the term is already over
				e.mu.Unlock()
				cancel()
				return
			}
			e.stopWork = cancel
			work.Add(1)
			e.mu.Unlock()
			defer work.Done()
			defer cancel()
			e.setLeading(true)
			defer e.setLeading(false)
			if e.cfg.OnStartedLeading != nil {
				e.cfg.OnStartedLeading(workCtx)
			} else {
				<-workCtx.Done()
			}
		})
		if err != nil {
			endCampaign()
			return err
		}
		e.term.begin(endCampaign)
		le.Run(campaign)
		// Run returns when leadership is lost (or the term ended it, or elCtx is done); the
		// work stops with it, and only then is the lease released.
		endCampaign()
		held := e.term.finish()
		stopWork()
		if held {
			e.release()
		}
	}
	return nil
}

// release gives the lease up, so that a follower need not wait for it to expire, if the
// record still names this process; Run calls it once this process's work has stopped.
// client-go's ReleaseOnCancel is not used: it releases before OnStartedLeading's work is told
// to stop, and it overwrites the record it has just read whenever its own last renewal named
// this process, even a record a follower wrote after this process's renewals stalled.
func (e *Elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.RenewDeadline)
	defer cancel()
	for ctx.Err() == nil {
		r, _, err := e.lock.Get(ctx)
		if err != nil || r.HolderIdentity != e.cfg.Identity {
			return
		}
		now := metav1.NewTime(time.Now())
		err = e.lock.Update(ctx, rl.LeaderElectionRecord{LeaseDurationSeconds: 1, AcquireTime: now, RenewTime: now, LeaderTransitions: r.LeaderTransitions})
		if !apierrors.IsConflict(err) { // released, or failed: the lease then expires by itself
			if err != nil {
				e.cfg.Logger.Warn("releasing the lease", "err", err)
			}
			return
		}
	}
}

func (e *Elector) setLeading(v bool) {
	if e.leading.Swap(v) != v {
		e.cfg.Metrics.LeaderTransition()
		e.cfg.Metrics.SetLeader(v)
		if v {
			e.leader.Store(e.cfg.Identity)
			e.cfg.Logger.Info("leading", "identity", e.cfg.Identity)
		} else {
			e.cfg.Logger.Info("stopped leading", "identity", e.cfg.Identity)
		}
	}
}

// IsLeader reports whether this process leads now: its leader's work runs and its term (see
// term) has not ended. A term that ended answers false at once, even while the work is still
// finishing its item, and even before a starved process's timers have fired.
func (e *Elector) IsLeader() bool { return e.leading.Load() && e.term.holds() }

// Leader is the identity of the holder this process last observed ("" when none).
func (e *Elector) Leader() string {
	if e.IsLeader() {
		return e.cfg.Identity
	}
	return e.leader.Load().(string)
}

// Lease returns the current lease record for /leader (nil when there is none yet).
func (e *Elector) Lease() any {
	r, ok := e.current()
	if !ok {
		return nil
	}
	return r.info()
}

// current reads the record without taking part in the election.
func (e *Elector) current() (record, bool) {
	switch l := e.lock.(type) {
	case *FileLock:
		return l.Peek()
	case *MemoryLock:
		return l.Peek(context.Background())
	}
	return record{}, false
}
