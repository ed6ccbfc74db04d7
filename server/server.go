package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/labstack/echo/v5/middleware"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/calls"
	"github.com/opemu/opemu/crd"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/faults"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/webhooks"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/utils/clock"
)

// Config configures a Server. Registry, Kinds, CRDs and Admission are required; every other
// zero value is documented as a default.
type Config struct {
	// Registry is what every request about objects goes through: reads, writes and watches.
	Registry *registry.Store
	// Kinds is every served kind: the server looks each request's kind up there.
	Kinds *kinds.Registry
	// CRDs answers GET /crd and /crds.
	CRDs *crd.Registry
	// PrimaryCRD names the CRD GET /crd answers (and GET / points at). Empty: /crd is 404.
	PrimaryCRD string
	Admission  *webhooks.Chain
	// Metrics records request, watch and webhook metrics and serves /metrics. Nil records nothing
	// and /metrics answers 404.
	Metrics *metrics.Registry
	// Events answers /events and /events/stats. Nil answers nothing.
	Events *events.Recorder
	// Controller reconciles objects; nil when the controller is off.
	Controller Controller
	// Loop pauses, steps and resumes the controllers and shows their queues (/controller);
	// nil when no controller runs.
	Loop Loop
	// Snapshots takes and restores the whole state (/snapshot, SPEC §23). Nil: those routes
	// answer 503.
	Snapshots Snapshots
	// Faults decides the faults injected into client requests (SPEC §16). Nil injects none.
	Faults *faults.Engine
	// ManualClock, when set, is the clock Config.Clock reads, moved by POST /clock/advance
	// (CLOCK=manual). Nil means the clock is real.
	ManualClock ManualClock
	// BookmarkInterval is how often a Kubernetes watch that allows bookmarks gets one. Zero
	// means 30 s.
	BookmarkInterval time.Duration
	// Logger receives request errors. Nil means slog.Default().
	Logger *slog.Logger
	// Identity names this process (POD_NAME) in /leader and /readyz. Empty means "opemu".
	Identity string
	// Leader reports leader election; nil means election is off (this process leads).
	Leader LeaderStatus
	// StoreName names the store in use ("memory" or "etcd") in GET / and /leader. Empty means
	// memory.
	StoreName string
	// StoreHealth, when set, is asked by /readyz whether the store's truth answers (etcd); an
	// error makes /readyz 503 with the error as its reason. Nil means always.
	StoreHealth func(ctx context.Context) error
	// Version is reported by GET /. Empty means "dev".
	Version string
	// MaxBody limits request bodies (413 beyond). Zero means 3 MiB.
	MaxBody int64
	// MaxInflight limits concurrent non-watch requests (429 beyond). Zero means 400.
	MaxInflight int
	// MaxWatches limits open HTTP watches, SSE and Kubernetes alike (429 beyond). Zero means
	// DefaultMaxWatches.
	MaxWatches int
	// RequestTimeout bounds every non-watch request. Zero means 5 s.
	RequestTimeout time.Duration
	// Heartbeat is the interval of SSE ": ping" comments. Zero means 15 s.
	Heartbeat time.Duration
	// WriteTimeout is the deadline for writing one SSE frame; a client that cannot take a
	// frame in time is disconnected. Zero means 10 s.
	WriteTimeout time.Duration
	// ShutdownTimeout bounds graceful shutdown in Run. Zero means 4 s.
	ShutdownTimeout time.Duration
	// PProf serves net/http/pprof under /debug/pprof/.
	PProf bool
	// Clock gives the time Tables compute ages from. Nil means the real clock. (Request
	// deadlines, heartbeats and bookmarks are transport timing and stay on the real clock.)
	Clock clock.PassiveClock

	// The request guard (SPEC §13, guard.go).

	// AllowedHosts are Host names a loopback listener answers besides localhost and loopback
	// addresses (ALLOWED_HOSTS): "*" allows any, ".example.com" a domain and its subdomains.
	AllowedHosts []string
	// AllowedOrigins are the browser origins (scheme://host[:port]) that may call the server
	// from another origin (ALLOWED_ORIGINS); only they get CORS headers.
	AllowedOrigins []string
	// Tokens, when set, authenticates every request but the health probes and the dashboard's
	// login (TOKEN, TOKEN_FILE). Nil serves everyone.
	Tokens *Tokens
	// TLS, when set, makes Run serve HTTPS (HTTP/2 included) with it.
	TLS *tls.Config
	// ClientCA, when set with TLS, authenticates client certificates it signed, as
	// kube-apiserver's --client-ca-file: the subject's CommonName is the user, its
	// Organizations the groups. Nil accepts no client certificate.
	ClientCA *x509.CertPool
	// Authorizer, when set, decides every authenticated request (AUTHORIZATION_MODE=RBAC:
	// *rbac.Authorizer); a request without credentials is then system:anonymous unless Tokens
	// is set (401). Nil allows every request (AlwaysAllow).
	Authorizer Authorizer
	// Calls records every request (SPEC §21, CALL_HISTORY) and answers /calls. Nil records
	// nothing and /calls answers 404.
	Calls *calls.Record
	// ServiceAccountKey signs and verifies the ServiceAccount tokens the TokenRequest
	// subresource issues. Nil means a key made by New (tokens valid for this process only).
	ServiceAccountKey *ecdsa.PrivateKey
}

// DefaultMaxWatches is Config.MaxWatches when unset. An idle watch costs about 17 KB of heap
// and two goroutines (docs/RELIABILITY.md).
const DefaultMaxWatches = 5000

// LeaderStatus is what the server needs to know about leader election. The leader package
// implements it; main passes it in.
type LeaderStatus interface {
	// IsLeader reports whether this process holds the lease now.
	IsLeader() bool
	// Leader returns the current holder's identity ("" when none is known).
	Leader() string
	// Lease returns the lease record as the /leader route shows it, or nil when none.
	Lease() any
}

// Controller is what the server needs from the reconciler; main passes it in.
type Controller interface {
	// Enqueue asks for an immediate reconcile; false when this process does not lead.
	Enqueue(key cache.Key) bool
	// History returns the recent reconciles of key (JSON-encodable), and whether the
	// controller reconciles key's resource at all.
	History(key cache.Key) (any, bool)
}

// Server serves the HTTP API. Create it with New; serve it with Run or Handler.
type Server struct {
	cfg      Config
	log      *slog.Logger
	echo     *echo.Echo
	inflight chan struct{}
	// watches counts open HTTP watches against MaxWatches.
	watches atomic.Int64
	// shutting is set once shutdown begins: readiness turns 503 and open watches end.
	shutting atomic.Bool
	// handling counts the requests whose handlers are running (limit), so Run can tell a
	// shutdown held up by a request from one held up by connections that carry none.
	handling atomic.Int64
	// stopWatches is closed when shutdown begins; watch handlers return when it is.
	stopWatches chan struct{}
	// streamsMu guards streams: the open watch responses, cut when shutdown begins.
	streamsMu sync.Mutex
	streams   map[*frameWriter]struct{}
	started   time.Time
	// allowedOrigins is Config.AllowedOrigins, normalized.
	allowedOrigins map[string]bool
	// openAPIV2Cache keeps /openapi/v2's protobuf encoding.
	openAPIV2Cache openAPIV2Cache
	// openapi caches the OpenAPI v3 documents of one generation of the served kinds.
	openapi openAPICache
	// discoveryCache keeps discovery of one generation of the served kinds.
	discoveryCache discoveryCache
	// sessions are the dashboard's logins (with Config.Tokens).
	sessions sessions
	// saKey signs ServiceAccount tokens (Config.ServiceAccountKey).
	saKey *ecdsa.PrivateKey
	// x509 authenticates client certificates (Config.ClientCA); nil without.
	x509 *x509request.Authenticator
	// impersonator is kube-apiserver's impersonation filter (authz.go).
	impersonator http.Handler
	// saVerified are the ServiceAccount tokens whose signature was checked (satoken.go).
	saVerified verifiedTokens
	// warningHeaders are the Warning headers sent so far, by text (warnings.go).
	warningHeaders warningHeaders
}

// New validates cfg and builds the routes.
func New(cfg Config) (*Server, error) {
	if cfg.Registry == nil || cfg.Kinds == nil || cfg.CRDs == nil || cfg.Admission == nil {
		return nil, errors.New("server: Registry, Kinds, CRDs and Admission are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Identity == "" {
		cfg.Identity = "opemu"
	}
	if cfg.StoreName == "" {
		cfg.StoreName = "memory"
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 3 << 20
	}
	if cfg.MaxInflight <= 0 {
		cfg.MaxInflight = 400
	}
	if cfg.MaxWatches <= 0 {
		cfg.MaxWatches = DefaultMaxWatches
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 5 * time.Second
	}
	if cfg.Heartbeat <= 0 {
		cfg.Heartbeat = 15 * time.Second
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 10 * time.Second
	}
	if cfg.BookmarkInterval <= 0 {
		cfg.BookmarkInterval = 30 * time.Second
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 4 * time.Second
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	s := &Server{
		cfg:            cfg,
		log:            cfg.Logger,
		inflight:       make(chan struct{}, cfg.MaxInflight),
		stopWatches:    make(chan struct{}),
		streams:        map[*frameWriter]struct{}{},
		started:        time.Now(),
		allowedOrigins: map[string]bool{},
	}
	if cfg.TLS != nil && cfg.ClientCA != nil {
		// Ask for a client certificate; a request without one goes on to the other credentials.
		t := cfg.TLS.Clone()
		t.ClientAuth, t.ClientCAs = tls.VerifyClientCertIfGiven, cfg.ClientCA
		s.cfg.TLS = t
		s.x509 = x509request.New(x509.VerifyOptions{Roots: cfg.ClientCA, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
			x509request.CommonNameUserConversion)
	}
	s.impersonator = newImpersonator(s.authz())
	s.saKey = cfg.ServiceAccountKey
	if s.saKey == nil {
		key, err := NewServiceAccountKey()
		if err != nil {
			return nil, err
		}
		s.saKey = key
	}
	for _, o := range cfg.AllowedOrigins {
		origin, err := ParseOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("server: AllowedOrigins: %w", err)
		}
		s.allowedOrigins[origin] = true
	}
	// A path no route serves is answered as kube-apiserver answers it (routeNotFound); a
	// known path with another method stays a 405.
	s.echo = echo.NewWithConfig(echo.Config{Router: echo.NewRouter(echo.RouterConfig{AllowOverwritingRoute: true, NotFoundHandler: s.routeNotFound})})
	s.echo.HTTPErrorHandler = s.errorHandler
	// A panic in a handler (say, in a library parsing a request) is answered as a 500 Status and
	// logged by errorHandler, instead of dropping the connection.
	// The guard comes before everything else a request meets but the metrics, so refusals are
	// counted.
	// Faults are injected after the limits (a delayed request holds its MAX_INFLIGHT slot and
	// meets its deadline) and before any handler.
	s.echo.Use(s.observe, s.guard, s.limit, middleware.RecoverWithConfig(middleware.RecoverConfig{DisablePrintStack: true}), s.injectFaults)
	s.routes()
	return s, nil
}

// Handler returns the server's http.Handler (for httptest).
func (s *Server) Handler() http.Handler { return s.echo }

// Run serves on ln until ctx is done, then shuts down gracefully: readiness turns 503, the
// listener closes, open watches end, and in-flight requests finish (bounded by
// Config.ShutdownTimeout). It returns once every request has returned. With Config.TLS it
// serves HTTPS on ln.
func (s *Server) Run(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: s.cfg.RequestTimeout,
		IdleTimeout:       2 * time.Minute,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
		ConnContext:       withListener(ln),
		TLSConfig:         s.cfg.TLS,
	}
	errc := make(chan error, 1)
	go func() {
		if s.cfg.TLS != nil {
			errc <- srv.ServeTLS(ln, "", "")
			return
		}
		errc <- srv.Serve(ln)
	}()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	s.BeginShutdown()
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cfg.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	if err != nil {
		// net/http waits up to 5 s for a connection that has not sent its first request (a
		// client's spare connection): past the bound, those are closed, and only a request
		// still being handled makes the shutdown a failure.
		_ = srv.Close()
		if s.handling.Load() == 0 {
			err = nil
		}
	}
	<-errc
	return err
}

// BeginShutdown turns readiness off and ends open watches: their handlers return, and a stream
// whose client stopped reading is cut off within shutdownGrace instead of holding shutdown up
// for its write timeout. Run calls it; it is idempotent.
func (s *Server) BeginShutdown() {
	if s.shutting.CompareAndSwap(false, true) {
		close(s.stopWatches)
		s.cutStreams()
	}
}

// limit enforces the body limit and read deadline of every request, MAX_WATCHES on watches
// (from here on, a Fault's delay included), and MAX_INFLIGHT and the per-request deadline of
// every other request but the pprof profile and trace.
func (s *Server) limit(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		s.handling.Add(1)
		defer s.handling.Add(-1)
		r := c.Request()
		rc := http.NewResponseController(c.Response())
		if r.Body != nil && r.Body != http.NoBody {
			// Every request's body must arrive within RequestTimeout: without a deadline a
			// client that never finishes one would hold the connection and its goroutine
			// forever. net/http lifts it when the body ends. A request without a body gets
			// none: net/http is already reading its connection in the background (to notice
			// a client leaving), and a deadline there would cancel the context of the
			// connection, so every later request on it would begin cancelled.
			_ = rc.SetReadDeadline(time.Now().Add(s.cfg.RequestTimeout))
			body := &eofReader{ReadCloser: r.Body}
			limit := s.cfg.MaxBody
			if r.URL.Path == snapshotRestorePath {
				limit *= snapshotBodyFactor // a cluster's state, not one object
			}
			r.Body = http.MaxBytesReader(c.Response(), body, limit)
			// net/http reads what is left of a small body before it writes the answer, to keep
			// the connection. For a body the handler did not read (or refused, past MAX_BODY),
			// read a little more first, so a client still sending (an oversized body) gets to
			// read the answer rather than a reset; if the body still has not ended, answer and
			// close the connection.
			if resp, err := echo.UnwrapResponse(c.Response()); err == nil {
				resp.Before(func() {
					if !body.eof.Load() {
						drainBody(c.Response(), body)
					}
					if !body.eof.Load() {
						resp.Header().Set("Connection", "close")
					}
				})
			}
		}
		if isLongRunning(c) {
			if err := discardBody(r); err != nil {
				return err
			}
			if isWatch(c) {
				release, err := s.acquireWatch()
				if err != nil {
					return err
				}
				defer release()
			}
			// The stream lasts as long as its client stays; net/http notices one that leaves.
			_ = rc.SetReadDeadline(time.Time{})
			return next(c)
		}
		select {
		case s.inflight <- struct{}{}:
			defer func() { <-s.inflight }()
		default:
			return tooManyRequests()
		}
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
		defer cancel()
		if isWrite(r.Method) {
			if call := callOf(c); call != nil {
				ctx = calls.WithAnnotations(ctx, call) // admission's audit annotations (SPEC §21)
			}
		}
		c.SetRequest(r.WithContext(ctx))
		return next(c)
	}
}

// observe records apiserver_request_* and the call (calls.go) for every request and turns a returned error into its
// Status here, so the recorded code is the one sent.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		start := time.Now()
		call := s.beginCall(c, start)
		err := next(c)
		if err != nil {
			s.errorHandler(c, err)
		}
		if s.cfg.Metrics != nil || call != nil {
			_, code := echo.ResolveResponseStatus(c.Response(), nil)
			took := time.Since(start)
			if s.cfg.Metrics != nil {
				s.cfg.Metrics.ObserveRequest(verbOf(c), resourceOf(c), code, took)
			}
			if call != nil {
				s.endCall(c, call, code, took)
			}
		}
		return nil
	}
}

// verbOf names the request the way apiserver_request_total does.
func verbOf(c *echo.Context) string {
	r := c.Request()
	switch r.Method {
	case http.MethodGet:
		if isWatch(c) {
			return "WATCH"
		}
		return "GET"
	case http.MethodPost:
		return "POST"
	case http.MethodPut:
		return "PUT"
	case http.MethodPatch:
		return "PATCH"
	case http.MethodDelete:
		return "DELETE"
	}
	return strings.ToUpper(r.Method)
}

// resourceOf is the resource label: the plural for resource routes, the route for the rest.
// It is valid UTF-8 whatever the path held (Prometheus panics on anything else).
func resourceOf(c *echo.Context) string {
	if res := c.Param("resource"); res != "" {
		if sub := c.Param("sub"); sub != "" {
			res += "/" + sub
		}
		return strings.ToValidUTF8(res, "\uFFFD")
	}
	if p := c.Path(); p != "" {
		return p
	}
	return "unknown"
}
