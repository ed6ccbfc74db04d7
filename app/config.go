package app

import (
	"crypto/tls"
	"crypto/x509"
	"log/slog"
	"time"

	"k8s.io/utils/clock"

	"github.com/opemu/opemu/certs"
	"github.com/opemu/opemu/server"
	"github.com/opemu/opemu/snapshot"
)

// Config is every setting of one server (SPEC §1). The zero value serves the API in memory on
// a free loopback port with the built-in controller and leader election off; main fills it from
// flags and the environment with the binary's defaults.
type Config struct {
	// Addr is the listen address. Empty means 127.0.0.1:0 (a free port).
	Addr string
	// PodName is this process's identity in leader election and Event sources. Empty means
	// "opemu".
	PodName string
	// EnableLeaderElection runs the elector; false means this process always leads.
	EnableLeaderElection bool
	// LeaseBackend is "file", "memory" or "store" (leader.BackendFile, BackendMemory,
	// BackendStore). Empty means memory, or store with the etcd store.
	LeaseBackend string
	// LeaseName and LeaseNamespace name the lease. Empty means elide-operator-leader/default.
	LeaseName, LeaseNamespace string
	// LeaseFile is the file backend's record. Empty means <tmp>/opemu-<ns>-<name>.lease.
	LeaseFile string
	// LeaseDuration, RenewDeadline and RetryPeriod are client-go's. Zero means 15 s, 10 s, 2 s.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// EnableController runs the built-in controllers: the Application controller, the
	// simulated workload controllers (Deployments, StatefulSets, Jobs), the garbage collector
	// and the namespace controller, on the leader.
	EnableController bool
	// EnableCollector runs the cluster's own controllers, the garbage collector and the
	// namespace controller (on the leader), even while EnableController is false: testenv's
	// shape, where the suite's own operator is the controller under test but an owner's
	// dependents are collected and a deleted namespace finishes as in a cluster. False: they
	// run with the controllers only (without either, a deleted namespace stays Terminating,
	// as under a lone kube-apiserver).
	EnableCollector bool
	// Nodes is how many Nodes the cluster has (package nodes: opemu-control-plane,
	// opemu-worker, opemu-worker2, ...), registered Ready by New and heartbeating while the
	// server runs (on the leader, when replicas share etcd). Zero means none, as under a lone
	// kube-apiserver; the binary's default is 1.
	Nodes int
	// WorkerCount is how many reconcile workers run. Zero means 2.
	WorkerCount int
	// ReconcileInterval is the periodic resync; zero disables it.
	ReconcileInterval time.Duration
	// MaxRetries is how many retries a failing key gets before it is dropped. Zero means 5;
	// negative means none (the first failure drops the key).
	MaxRetries int
	// BackoffBase and BackoffMax bound the per-key backoff. Zero means 1 s and 16 s.
	BackoffBase, BackoffMax time.Duration
	// QueueQPS and QueueBurst size the token bucket of rate-limited requeues. Zero means 10 and 100.
	QueueQPS   float64
	QueueBurst int
	// RolloutStep is the time between simulated readiness steps of Applications, and how long
	// a Pod bound to one of the Nodes takes to run and be Ready; zero is instant.
	RolloutStep time.Duration
	// JobDuration is how long a Job's Pod runs on one of the Nodes before it succeeds; zero is
	// instant.
	JobDuration time.Duration
	// WatchHistory is how many watch events are kept per resource. Zero means 10000.
	WatchHistory int
	// WatchHistoryBytes bounds the watch history of every resource together. Zero means
	// cache.DefaultWatchHistoryBytes (128 MiB).
	WatchHistoryBytes int64

	// The store (SPEC §12).

	// Store is StoreMemory (each process its own cluster) or StoreEtcd (replicas sharing one
	// etcd). Empty means memory.
	Store string
	// EtcdEndpoints are etcd's client URLs. Empty means http://127.0.0.1:2379.
	EtcdEndpoints []string
	// EtcdPrefix is the key prefix of the objects. Empty means /opemu.
	EtcdPrefix string
	// EtcdTLS, when set, is the TLS configuration for etcd (its CA, a client certificate).
	EtcdTLS *tls.Config
	// EtcdCompactionInterval is how often the leader compacts etcd's history; zero never.
	EtcdCompactionInterval time.Duration
	// EventLimit is the most Events kept by the in-memory store (with etcd, each Event's lease
	// of EventTTL alone bounds them, as in kube-apiserver). EventTTL is how long an Event lives
	// after its last write. Zero means 10000 and 1 h.
	EventLimit int
	EventTTL   time.Duration
	// AllowedRegistries and BlockedImages are the image policy; empty means any and none.
	AllowedRegistries []string
	BlockedImages     []string
	// MaxBody limits request bodies. Zero means 3 MiB.
	MaxBody int64
	// MaxInflight limits concurrent non-watch requests. Zero means 400.
	MaxInflight int
	// MaxWatches limits open watches (SSE and Kubernetes). Zero means server.DefaultMaxWatches.
	MaxWatches int
	// MaxCRDs limits the CRDs served, built-in ones not counted (403 beyond). Zero means
	// crd.DefaultMaxCRDs.
	MaxCRDs int
	// MaxCRDBytes limits the total size of those CRDs as JSON (403 beyond). Zero means
	// crd.DefaultMaxCRDBytes.
	MaxCRDBytes int64
	// PProf serves /debug/pprof/.
	PProf bool
	// CallHistory is how many calls the record of calls keeps (SPEC §21, CALL_HISTORY). Zero
	// means calls.DefaultSize; negative keeps no record (/calls answers 404).
	CallHistory int
	// AuditLogPath, when set, is the file the calls are written to as kube-apiserver's audit
	// log (audit.k8s.io/v1 Events, JSON lines), as its --audit-log-path; "-" is standard output.
	// AuditPolicyFile is kube-apiserver's --audit-policy-file; empty logs every call at level
	// Metadata.
	AuditLogPath    string
	AuditPolicyFile string

	// The request guard, tokens and TLS (SPEC §13).

	// AllowedHosts and AllowedOrigins are server.Config's: Host names a loopback listener also
	// answers, and browser origins that may call the API (with CORS).
	AllowedHosts, AllowedOrigins []string
	// Tokens authenticates every request but the health probes. Nil on a listener beyond
	// loopback means Run generates a token (user AdminUser) and logs it with a dashboard URL,
	// unless InsecureNoAuth.
	Tokens         *server.Tokens
	InsecureNoAuth bool
	// TLS, when set, serves HTTPS. SelfSigned is the CA and certificate it holds when they are
	// opemu's own (TLS=self-signed), for the log.
	TLS        *tls.Config
	SelfSigned *certs.Bundle
	// ClientCA, with TLS, authenticates client certificates it signed (CommonName the user,
	// Organizations the groups), as kube-apiserver's --client-ca-file. Nil accepts none.
	ClientCA *x509.CertPool
	// AuthorizationMode is kube-apiserver's --authorization-mode: "RBAC" decides every request
	// by the Roles and bindings stored (with kube's bootstrap policy created at start, and a
	// token generated for the admin when none is configured); "" or "AlwaysAllow" allows
	// every request.
	AuthorizationMode string

	// Version is what GET / reports. Empty means "dev".
	Version string
	// Logger receives every log line. Nil means slog.Default().
	Logger *slog.Logger
	// Clock is the one clock every part that stamps or waits reads (timestamps, rollout steps,
	// backoff and requeue timers, resync, Event expiry, Fault expiry). Nil means the real clock.
	// A clock with a Step(time.Duration) method (server.ManualClock, e.g. NewManualClock) is
	// moved by POST /clock/advance (CLOCK=manual); leader election then keeps the real clock.
	Clock clock.WithTicker
	// Objects are created through the write path when the server is wired, in order, after the
	// built-in CRDs and as opemu's own writes (strict field validation, no Events): typed objects
	// or decoded JSON, each with apiVersion, kind and a name. A CRD among them is served
	// (Established) before the next is created, so its custom resources may follow it; a
	// Namespace likewise comes before what is created into it (the system namespaces exist).
	// testenv installs a suite's CRDs and webhook configurations with it. An object that exists
	// is kept; one that cannot be created fails New, naming it.
	Objects []any
	// Load, when set, is the state the server starts from (LOAD, SPEC §23): New restores it
	// (App.Restore) before it creates what a cluster has from its start and the snapshot
	// lacks, Objects among them. With STORE=etcd it replaces what etcd holds under the prefix.
	Load *snapshot.Snapshot
	// Ready, when set, is called once the server is wired, just before it serves. The binary
	// returns start-up's garbage to the OS there (idle RSS), rather than when the runtime's
	// scavenger gets to it.
	Ready func()
}
