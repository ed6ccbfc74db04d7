package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The answers of a replica that is still starting, waiting for its store (etcd): it is alive
// (/healthz, /livez 200) and not ready (/readyz 503, its etcd check failing), and every other
// request is a 503 Status saying so, as kube-apiserver answers while etcd is away. Probes and
// clients see a server from the first moment, and the same listener then serves the real one.

// StartingConfig configures Starting.
type StartingConfig struct {
	// Waiting names what the replica waits for in answers ("etcd").
	Waiting string
	// TLS, when set, serves HTTPS (as Config.TLS will).
	TLS *tls.Config
	// Logger nil means slog.Default().
	Logger *slog.Logger
}

// Starting serves ln with a starting replica's answers until stop is called. stop returns once
// nothing serves ln any more and the requests in flight have ended; ln stays open, for Run.
// ln must be able to set an accept deadline (a *net.TCPListener, as net.Listen makes).
func Starting(ln net.Listener, cfg StartingConfig) (stop func(), err error) {
	dl, ok := ln.(interface{ SetDeadline(time.Time) error })
	if !ok {
		return nil, errors.New("server: Starting needs a listener with SetDeadline")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	lent := &lentListener{Listener: ln, deadline: dl}
	var serve net.Listener = lent
	if cfg.TLS != nil {
		serve = tls.NewListener(lent, cfg.TLS)
	}
	srv := &http.Server{
		Handler:           startingHandler(cfg.Waiting),
		ReadHeaderTimeout: 5 * time.Second,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(serve)
	}()
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if srv.Shutdown(ctx) != nil {
			_ = srv.Close()
		}
		<-done
		_ = dl.SetDeadline(time.Time{})
	}, nil
}

// lentListener is a listener lent to the starting server: closing it ends its Accept (by a
// deadline in the past) and leaves the listener open.
type lentListener struct {
	net.Listener
	deadline interface{ SetDeadline(time.Time) error }
	mu       sync.Mutex
	closed   bool
}

func (l *lentListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	l.mu.Lock()
	closed := l.closed
	l.mu.Unlock()
	if closed {
		if c != nil {
			_ = c.Close()
		}
		return nil, net.ErrClosed
	}
	return c, err
}

func (l *lentListener) Close() error {
	l.mu.Lock()
	l.closed = true
	l.mu.Unlock()
	return l.deadline.SetDeadline(time.Unix(1, 0))
}

// startingHandler answers as a replica waiting for waiting.
func startingHandler(waiting string) http.Handler {
	reason := "opemu is starting: waiting for " + waiting
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		path := strings.TrimSuffix(r.URL.Path, "/")
		_, verbose := r.URL.Query()["verbose"]
		switch {
		case path == "/healthz" || path == "/livez":
			if verbose {
				plainText(w, http.StatusOK, "[+]ping ok\n"+path[1:]+" check passed\n")
				return
			}
			if path == "/livez" {
				plainText(w, http.StatusOK, "ok")
				return
			}
			plainJSON(w, http.StatusOK, map[string]any{"status": "healthy"})
		case path == "/readyz":
			if verbose {
				plainText(w, http.StatusServiceUnavailable, "[+]ping ok\n[-]"+waiting+" failed: reason withheld\n[+]shutdown ok\nreadyz check failed\n")
				return
			}
			plainJSON(w, http.StatusServiceUnavailable, map[string]any{"status": "not ready", "isLeader": false, "leader": "", "reason": reason})
		case path == "/readyz/"+waiting:
			plainText(w, http.StatusServiceUnavailable, "internal server error: "+reason)
		default:
			st := apierrors.NewServiceUnavailable(reason).ErrStatus
			st.TypeMeta = metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}
			w.Header().Set("Retry-After", "1")
			plainJSON(w, http.StatusServiceUnavailable, st)
		}
	})
}

func plainText(w http.ResponseWriter, code int, s string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write([]byte(s))
}

func plainJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
