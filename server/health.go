package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
)

// Health (SPEC §4.1): /healthz and /readyz answer opemu's JSON ({"status":"healthy"}, and
// readiness with the leader), /livez kube-apiserver's "ok". With ?verbose each lists its checks
// in kube-apiserver's text ("[+]ping ok" ... "readyz check passed"), ?exclude=<check> skips one,
// and /<endpoint>/<check> runs one, as `kubectl get --raw='/readyz?verbose'` expects.

// healthCheck is one named check of a health endpoint.
type healthCheck struct {
	name  string
	check func(ctx context.Context) error
}

var errNotLeading = errors.New("this process does not lead")

// healthChecks returns the checks of endpoint ("healthz", "livez" or "readyz"). The process
// is alive while it answers; it is ready while the store's truth answers, it leads (or election
// is off, or there is no controller to lead), and shutdown has not begun.
func (s *Server) healthChecks(endpoint string) []healthCheck {
	checks := []healthCheck{{"ping", func(context.Context) error { return nil }}}
	if endpoint != "readyz" {
		return checks
	}
	if s.cfg.StoreHealth != nil {
		checks = append(checks, healthCheck{"etcd", s.cfg.StoreHealth})
	}
	return append(checks,
		healthCheck{"leader", func(context.Context) error {
			if s.isLeader() || s.cfg.Controller == nil {
				return nil
			}
			return errNotLeading
		}},
		healthCheck{"shutdown", func(context.Context) error {
			if s.shutting.Load() {
				return errors.New("the server is shutting down")
			}
			return nil
		}})
}

// failedCode is the status of a failing endpoint: 503 for readiness (SPEC §4.1), else kube's
// 500.
func failedCode(endpoint string) int {
	if endpoint == "readyz" {
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// health serves /healthz, /livez and /readyz.
func (s *Server) health(endpoint string) echo.HandlerFunc {
	return func(c *echo.Context) error {
		q := c.Request().URL.Query()
		excluded := map[string]bool{}
		for _, v := range q["exclude"] {
			for _, name := range strings.Split(v, ",") {
				excluded[strings.TrimSpace(name)] = true
			}
		}
		var out strings.Builder
		var failed error
		for _, hc := range s.healthChecks(endpoint) {
			if excluded[hc.name] {
				delete(excluded, hc.name)
				fmt.Fprintf(&out, "[+]%s excluded: ok\n", hc.name)
				continue
			}
			if err := hc.check(c.Request().Context()); err != nil {
				if failed == nil {
					failed = err
				}
				// As kube-apiserver: the reason is for the log, not this public endpoint.
				fmt.Fprintf(&out, "[-]%s failed: reason withheld\n", hc.name)
				continue
			}
			fmt.Fprintf(&out, "[+]%s ok\n", hc.name)
		}
		if len(excluded) > 0 {
			names := make([]string, 0, len(excluded))
			for n := range excluded {
				names = append(names, fmt.Sprintf("%q", n))
			}
			slices.Sort(names)
			fmt.Fprintf(&out, "warn: some health checks cannot be excluded: no matches for %s\n", strings.Join(names, ","))
		}
		if _, verbose := q["verbose"]; verbose {
			code, verdict := http.StatusOK, "passed"
			if failed != nil {
				code, verdict = failedCode(endpoint), "failed"
			}
			return writeText(c, code, out.String()+endpoint+" check "+verdict+"\n")
		}
		switch endpoint {
		case "healthz":
			return c.JSON(http.StatusOK, map[string]string{"status": "healthy"})
		case "readyz":
			return s.readiness(c, failed)
		}
		if failed != nil {
			return writeText(c, failedCode(endpoint), out.String()+endpoint+" check failed")
		}
		return writeText(c, http.StatusOK, "ok")
	}
}

// readiness is /readyz's JSON: ready and who leads, or not ready, with the store's reason when
// its truth does not answer.
func (s *Server) readiness(c *echo.Context, failed error) error {
	leading := s.isLeader()
	if failed == nil {
		return c.JSON(http.StatusOK, map[string]any{"status": "ready", "isLeader": leading, "leader": s.leaderName()})
	}
	body := map[string]any{"status": "not ready", "isLeader": leading, "leader": s.leaderName()}
	if !errors.Is(failed, errNotLeading) && !s.shutting.Load() {
		body["reason"] = storeReason(failed)
	}
	return c.JSON(http.StatusServiceUnavailable, body)
}

// healthCheckOne serves /<endpoint>/<check>: "ok", or the failure.
func (s *Server) healthCheckOne(endpoint string) echo.HandlerFunc {
	return func(c *echo.Context) error {
		for _, hc := range s.healthChecks(endpoint) {
			if hc.name != c.Param("check") {
				continue
			}
			if err := hc.check(c.Request().Context()); err != nil {
				return writeText(c, failedCode(endpoint), "internal server error: "+err.Error())
			}
			return writeText(c, http.StatusOK, "ok")
		}
		return errPageNotFound
	}
}

// storeReason is the reason /readyz gives for a store that does not answer.
func storeReason(err error) string {
	var cerr *cache.Error
	if errors.As(err, &cerr) && cerr.Message != "" {
		return cerr.Message
	}
	return err.Error()
}

// writeText answers text as kube-apiserver's health endpoints do.
func writeText(c *echo.Context, code int, text string) error {
	c.Response().Header().Set("X-Content-Type-Options", "nosniff")
	return c.Blob(code, "text/plain; charset=utf-8", []byte(text))
}
