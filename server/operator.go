package server

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Routes of the operator inside: Event queries, reconcile history and manual triggers.

func (s *Server) queryEvents(c *echo.Context) error {
	q := c.Request().URL.Query()
	eq := events.Query{
		Namespace: q.Get("namespace"), Name: q.Get("name"), Kind: q.Get("kind"),
		Type: q.Get("type"), Severity: q.Get("severity"), Reason: q.Get("reason"),
	}
	if v := q.Get("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			return badRequest("since must be an RFC 3339 time, not %q", v)
		}
		eq.Since = t
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return badRequest("limit must be a positive integer, not %q", v)
		}
		eq.Limit = n
	}
	if s.cfg.Events == nil {
		return c.JSON(http.StatusOK, map[string]any{"events": []any{}})
	}
	items, err := s.cfg.Events.Query(c.Request().Context(), eq)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"events": items})
}

func (s *Server) eventStats(c *echo.Context) error {
	if s.cfg.Events == nil {
		return c.JSON(http.StatusOK, events.Stats{ByType: map[string]int{}, BySeverity: map[string]int{}})
	}
	st, err := s.cfg.Events.Stats(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// history serves GET .../{name}/history: the object's recent reconciles.
func (s *Server) history(c *echo.Context, t registry.Target) error {
	if _, err := s.cfg.Registry.Get(c.Request().Context(), t, "0"); err != nil {
		return err
	}
	items := any([]any{})
	if s.cfg.Controller != nil {
		h, ok := s.cfg.Controller.History(t.Key)
		if !ok {
			return notReconciled(t)
		}
		items = h
	}
	return c.JSON(http.StatusOK, map[string]any{"items": items})
}

// triggerReconcile serves POST .../{name}/reconcile: 202 and an immediate reconcile, or 503
// naming the leader when this process does not lead.
func (s *Server) triggerReconcile(c *echo.Context) error {
	t, err := s.parseTarget(c)
	if err != nil {
		return err
	}
	if t.Sub != "reconcile" {
		return methodNotSupported(t, "create")
	}
	if _, err := s.cfg.Registry.Get(c.Request().Context(), t, "0"); err != nil {
		return err
	}
	if s.cfg.Controller == nil {
		return apierrors.NewServiceUnavailable("the controller is disabled (ENABLE_CONTROLLER=false)")
	}
	if _, ok := s.cfg.Controller.History(t.Key); !ok {
		return notReconciled(t)
	}
	if !s.isLeader() || !s.cfg.Controller.Enqueue(t.Key) {
		return apierrors.NewServiceUnavailable("this replica does not lead; the leader is " + quoteOrNone(s.leaderName()))
	}
	return c.JSON(http.StatusAccepted, map[string]any{
		"status": "accepted", "message": "reconcile queued", "name": t.Key.Name, "namespace": t.Key.Namespace,
	})
}

// notReconciled is the 404 of history and reconcile for a resource no controller reconciles.
func notReconciled(t registry.Target) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusNotFound, Reason: metav1.StatusReasonNotFound,
		Message: fmt.Sprintf("no controller reconciles %s: create a Controller (controllers.opemu.dev/v1) naming it to reconcile it with a hook",
			t.GroupResource().String()),
		Details: &metav1.StatusDetails{Name: t.Key.Name, Group: t.Kind.Group, Kind: t.Kind.Plural},
	}}
}

func quoteOrNone(s string) string {
	if s == "" {
		return "unknown"
	}
	return strconv.Quote(s)
}
