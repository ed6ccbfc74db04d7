package etcd

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/opemu/opemu/cache"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Config configures a Store. Client is required; every zero value is a documented default.
type Config struct {
	// Client talks to etcd (or any endpoint that speaks its API, such as kine). The caller
	// owns it: Close does not close it.
	Client *clientv3.Client
	// Prefix is where the objects live: <Prefix>/<group or "core">/<resource>/<namespace>/<name>.
	// Empty means "/opemu".
	Prefix string
	// Cache configures the watch cache: WatchHistory, WatchBuffer, SelectableFields.
	// StartResourceVersion is ignored (it is the revision of the first list).
	Cache cache.Config
	// RequestTimeout bounds one call to etcd (less when the caller's context ends sooner).
	// Zero means 3 s.
	RequestTimeout time.Duration
	// FreshTimeout bounds how long a read waits for the watch cache to catch up with etcd
	// (WaitUntilFresh, a watch from a version not yet seen) and a write for the cache to hold
	// it. Zero means 3 s.
	FreshTimeout time.Duration
	// StartTimeout bounds New's first list while etcd does not answer. Zero means 10 s.
	StartTimeout time.Duration
	// Identity names this replica in the progress key it writes. Empty means "opemu".
	Identity string
	// Logger receives the feed's troubles (a lost watch, a re-list). Nil means slog.Default().
	Logger *slog.Logger
	// SingleWrites gives every write a transaction, hence a revision, of its own, creates
	// that carry a TTL included. False (the default): group commit (batch.go), concurrent
	// creates that carry a TTL (Events) are written in one transaction and share its revision,
	// hence one resourceVersion; a watch resuming at such a version gets all of its changes
	// again (cache.WatchOptions.ResourceVersion).
	SingleWrites bool
}

// ErrUnavailable is (errors.Is) New's error when etcd did not answer within StartTimeout: a
// caller may try again.
var ErrUnavailable = errors.New("etcd is unavailable")

// unavailable is an error that is ErrUnavailable.
type unavailable struct{ error }

func (unavailable) Is(target error) bool { return target == ErrUnavailable }

// Store is cache.Interface over etcd, with a watch cache per replica. See the package doc.
type Store struct {
	cfg    Config
	client *clientv3.Client
	keys   keys
	c      *cache.WatchCache
	log    *slog.Logger
	leases leases
	batch  batcher

	// pending holds, per etcd key, the encoded object (version 0) of this replica's write in
	// flight, so the feed takes it instead of decoding etcd's copy of the same bytes.
	pending sync.Map // string → *cache.Object

	progress progress
	relists  atomic.Int64
	// restoring is set by the feed (its goroutine alone) from the beginning of a restore it
	// saw until it has listed again after its end (restore.go).
	restoring bool

	closed atomic.Bool
	stop   context.CancelFunc
	done   chan struct{}
}

var _ cache.Interface = (*Store)(nil)

// New lists every object under cfg.Prefix into a new watch cache and starts the feed that
// keeps it current (one etcd watch). It returns once the cache holds etcd's state, or an error
// (ErrUnavailable) when etcd did not answer within StartTimeout. Close stops the feed.
func New(cfg Config) (*Store, error) {
	if cfg.Client == nil {
		return nil, errors.New("etcd: Client is required")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = "/opemu"
	}
	for len(cfg.Prefix) > 1 && cfg.Prefix[len(cfg.Prefix)-1] == '/' {
		cfg.Prefix = cfg.Prefix[:len(cfg.Prefix)-1]
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 3 * time.Second
	}
	if cfg.FreshTimeout <= 0 {
		cfg.FreshTimeout = 3 * time.Second
	}
	if cfg.StartTimeout <= 0 {
		cfg.StartTimeout = 10 * time.Second
	}
	if cfg.Identity == "" {
		cfg.Identity = "opemu"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cc := cfg.Cache
	cc.StartResourceVersion = 1
	s := &Store{
		cfg:    cfg,
		client: cfg.Client,
		keys:   keys{prefix: cfg.Prefix},
		c:      cache.NewWatchCache(cc),
		log:    cfg.Logger,
		done:   make(chan struct{}),
	}
	s.leases.client = cfg.Client
	s.batch.s = s
	ctx, cancel := context.WithTimeout(context.Background(), cfg.StartTimeout)
	defer cancel()
	var rev int64
	for {
		objs, r, err := s.list(ctx)
		if err == nil && r <= 1 {
			// An etcd nothing was ever written to is at revision 1, which no write issues:
			// the progress key makes the cache start at a write's version, so a client's
			// version 1 is older than the cache (410), as on kube-apiserver, whose watch
			// caches start after its own first writes.
			if _, err = s.writeProgress(ctx); err == nil {
				continue
			}
		}
		if err == nil {
			if err := s.c.Replace(objs, uint64(r)); err != nil {
				return nil, err
			}
			rev = r
			break
		}
		if ctx.Err() != nil {
			return nil, unavailable{fmt.Errorf("etcd: cannot list %s at %v within %v: %w", s.keys.root(), cfg.Client.Endpoints(), cfg.StartTimeout, err)}
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	runCtx, stop := context.WithCancel(context.Background())
	s.stop = stop
	go s.run(runCtx, rev)
	return s, nil
}

// Close stops the feed, ends every watch (ErrClosed) and refuses further writes. It is
// idempotent.
func (s *Store) Close() {
	if s.closed.Swap(true) {
		return
	}
	s.stop()
	<-s.done
	s.c.Close()
}

// Relists is how many times the feed refilled the cache after its watch could not resume
// (etcd compacted past it).
func (s *Store) Relists() int64 { return s.relists.Load() }

// Get returns the object at key as this replica's cache holds it.
func (s *Store) Get(ctx context.Context, key cache.Key) (*cache.Object, error) {
	return s.c.Get(ctx, key)
}

// List returns the objects of gr matching opts as this replica's cache holds them.
func (s *Store) List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error) {
	return s.c.List(ctx, gr, opts...)
}

// Watch streams the changes matching opts (see cache.WatchOptions). A version this replica has
// not seen yet but etcd has issued (a list made on another replica) is waited for, up to
// FreshTimeout; one beyond etcd's current revision was never issued (ErrGone), unless
// opts.WaitForVersion makes it one to wait for.
func (s *Store) Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error) {
	if rv := opts.ResourceVersion; rv > s.c.ResourceVersion() {
		cctx, cancel := s.freshCtx(ctx)
		defer cancel()
		cur, err := s.currentRevision(cctx)
		if err != nil {
			return nil, err
		}
		if rv > cur && !opts.WaitForVersion {
			return nil, &cache.Error{Err: cache.ErrGone, Message: fmt.Sprintf("too old resource version: %d (never issued: etcd is at %d)", rv, cur)}
		}
		// A version etcd has not reached yet is then the cache's to wait for.
		if err := s.waitFor(cctx, min(rv, cur)); err != nil {
			return nil, err
		}
	}
	return s.c.Watch(ctx, opts)
}

// ResourceVersion is the revision this replica's cache has reached.
func (s *Store) ResourceVersion() uint64 { return s.c.ResourceVersion() }

// StartResourceVersion is the revision the cache was last filled at; older versions are not
// served (410), whoever issued them.
func (s *Store) StartResourceVersion() uint64 { return s.c.StartResourceVersion() }

// CheckResourceVersion reports whether every change after rv to grs is in the cache's history.
func (s *Store) CheckResourceVersion(rv uint64, grs ...cache.GroupResource) error {
	return s.c.CheckResourceVersion(rv, grs...)
}

// Counts returns the object counts per resource and namespace in the cache.
func (s *Store) Counts() []cache.ResourceCount { return s.c.Counts() }

// EndWatches ends this replica's watches of gr alone (ErrClosed), for a resource that stopped
// being served because its CRD was deleted through another replica.
func (s *Store) EndWatches(gr cache.GroupResource) { s.c.EndWatches(gr) }

// WaitUntilFresh returns once this replica's cache holds every write etcd has committed (rv
// 0: it asks etcd for its current revision) or revision rv. When the cache lags because etcd's
// revision moved with writes outside this prefix, it writes the progress key, whose event
// brings the cache up to date. Past FreshTimeout: ErrTimeout.
func (s *Store) WaitUntilFresh(ctx context.Context, rv uint64) error {
	ctx, cancel := s.freshCtx(ctx)
	defer cancel()
	if rv == 0 || rv > s.c.ResourceVersion() {
		cur, err := s.currentRevision(ctx)
		if err != nil {
			return err
		}
		switch {
		case rv == 0:
			rv = cur
		case rv > cur:
			return &cache.Error{Err: cache.ErrTimeout, Message: fmt.Sprintf("Too large resource version: %d, current: %d", rv, cur)}
		}
	}
	return s.waitFor(ctx, rv)
}

// Health reports whether etcd answers a linearizable read within a second: nil, or an error
// naming etcd and saying why (for /readyz).
func (s *Store) Health(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	_, err := s.currentRevision(ctx)
	return err
}

// waitFor waits until the cache holds revision rv, writing the progress key when the cache
// does not get there by itself at once.
func (s *Store) waitFor(ctx context.Context, rv uint64) error {
	if s.c.ResourceVersion() >= rv {
		return nil
	}
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	err := s.c.WaitUntil(short, rv)
	cancel()
	for err != nil && ctx.Err() == nil && !errors.Is(err, cache.ErrClosed) {
		var w int64
		if w, err = s.writeProgress(ctx); err != nil {
			return err
		}
		if uint64(w) >= rv {
			err = s.c.WaitUntil(ctx, rv)
		}
	}
	if err != nil && ctx.Err() != nil {
		return &cache.Error{Err: cache.ErrTimeout, Message: fmt.Sprintf("etcd: this replica's watch cache did not reach revision %d within %v (it is at %d)", rv, s.cfg.FreshTimeout, s.c.ResourceVersion())}
	}
	return err
}

// currentRevision asks etcd for its current revision (a linearizable read).
func (s *Store) currentRevision(ctx context.Context) (uint64, error) {
	cctx, cancel := s.callCtx(ctx)
	defer cancel()
	resp, err := s.client.Get(cctx, s.progressKey(), clientv3.WithCountOnly())
	if err != nil {
		return 0, s.fail("read of the current revision", cache.Key{}, err)
	}
	return uint64(resp.Header.Revision), nil
}

// callCtx bounds one etcd call by RequestTimeout, and a little before the caller's own
// deadline so that the caller can still answer with the error.
func (s *Store) callCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return withBound(ctx, s.cfg.RequestTimeout)
}

// freshCtx bounds waiting for the cache by FreshTimeout, the same way.
func (s *Store) freshCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return withBound(ctx, s.cfg.FreshTimeout)
}

// margin is what a bounded call leaves of its caller's deadline for answering.
const margin = 250 * time.Millisecond

func withBound(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if dl, ok := ctx.Deadline(); ok {
		if rem := time.Until(dl) - margin; rem < d {
			d = max(rem, 10*time.Millisecond)
		}
	}
	return context.WithTimeout(ctx, d)
}

// fail turns an etcd client error into the cache error a client gets: a 504 naming etcd for a
// timeout, a 413 for a value etcd refuses as too large, a 503 for anything else etcd answered
// (or failed to).
func (s *Store) fail(op string, key cache.Key, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, context.Canceled):
		return err
	case errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded:
		return &cache.Error{Err: cache.ErrTimeout, Key: key, Message: fmt.Sprintf("etcd did not answer the %s in time (etcd at %v)", op, s.client.Endpoints())}
	case errors.Is(err, rpctypes.ErrRequestTooLarge) || status.Code(err) == codes.ResourceExhausted:
		return &cache.Error{Err: cache.ErrTooLarge, Key: key, Message: "etcd refused the object as too large: " + rpctypes.ErrorDesc(err)}
	}
	return &cache.Error{Err: cache.ErrUnavailable, Key: key, Message: fmt.Sprintf("etcd is unavailable (%s at %v): %s", op, s.client.Endpoints(), rpctypes.ErrorDesc(err))}
}
