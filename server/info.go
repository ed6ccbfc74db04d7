package server

import (
	"net/http"
	"sort"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/webhooks"
)

// root describes the server: what it is, what it does, who leads, where to go next. A browser
// (a request that accepts HTML) is sent to the dashboard instead.
func (s *Server) root(c *echo.Context) error {
	c.Response().Header().Add("Vary", "Accept")
	if wantsHTML(c.Request()) {
		return c.Redirect(http.StatusFound, dashboardPath)
	}
	var resources []string
	for _, k := range s.cfg.Kinds.Custom() {
		resources = append(resources, k.GroupVersion()+"/"+k.Plural)
	}
	sort.Strings(resources)
	endpoints := map[string]string{
		"dashboard":  dashboardPath,
		"health":     "/healthz",
		"readiness":  "/readyz",
		"liveness":   "/livez",
		"leader":     "/leader",
		"crd":        "/crd",
		"crds":       "/crds",
		"validate":   "POST /validate",
		"mutate":     "POST /mutate",
		"metrics":    "/metrics",
		"watch":      "/watch",
		"controller": "/controller (POST /controller/pause, /controller/step, /controller/resume)",
		"clock":      "/clock (POST /clock/advance)",
		"snapshot":   "POST /snapshot, POST /snapshot/restore",
	}
	if c, ok := s.cfg.CRDs.CRD(s.cfg.PrimaryCRD); ok {
		for _, v := range c.Spec.Versions {
			if v.Storage {
				endpoints[c.Spec.Names.Plural] = "/apis/" + c.Spec.Group + "/" + v.Name + "/namespaces/{namespace}/" + c.Spec.Names.Plural
			}
		}
	}
	return c.JSON(http.StatusOK, map[string]any{
		"name":    "opemu",
		"version": s.cfg.Version,
		"features": []string{
			"custom-resources", "schema-validation", "admission-webhooks", "server-sent-events",
			"finalizers", "optimistic-concurrency", "prometheus-metrics",
		},
		"resources": resources,
		"isLeader":  s.isLeader(),
		"store":     s.cfg.StoreName,
		"endpoints": endpoints,
	})
}

func (s *Server) isLeader() bool { return s.cfg.Leader == nil || s.cfg.Leader.IsLeader() }

func (s *Server) leaderName() string {
	if s.cfg.Leader == nil {
		return s.cfg.Identity
	}
	return s.cfg.Leader.Leader()
}

func (s *Server) leader(c *echo.Context) error {
	var lease any
	if s.cfg.Leader != nil {
		lease = s.cfg.Leader.Lease()
	}
	return c.JSON(http.StatusOK, map[string]any{
		"isLeader":        s.isLeader(),
		"identity":        s.cfg.Identity,
		"leader":          s.leaderName(),
		"electionEnabled": s.cfg.Leader != nil,
		"store":           s.cfg.StoreName,
		"lease":           lease,
	})
}

func (s *Server) applicationCRD(c *echo.Context) error {
	def, ok := s.cfg.CRDs.CRD(s.cfg.PrimaryCRD)
	if !ok {
		return echo.ErrNotFound
	}
	return c.JSON(http.StatusOK, def)
}

func (s *Server) listCRDs(c *echo.Context) error {
	return c.JSON(http.StatusOK, map[string]any{"items": s.cfg.CRDs.CRDs()})
}

// review serves /validate (mutating=false) and /mutate with the same chain the API uses.
func (s *Server) review(mutating bool) echo.HandlerFunc {
	return func(c *echo.Context) error {
		body, err := readBody(c)
		if err != nil {
			return err
		}
		out, err := webhooks.Review(c.Request().Context(), s.cfg.Admission, body, mutating)
		if err != nil {
			return err
		}
		return writeRaw(c, http.StatusOK, out)
	}
}

func (s *Server) metrics(c *echo.Context) error {
	if s.cfg.Metrics == nil {
		return echo.ErrNotFound
	}
	s.cfg.Metrics.Handler().ServeHTTP(c.Response(), c.Request())
	return nil
}
