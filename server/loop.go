package server

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Time you can stop (SPEC §16): the controllers paused, stepped and resumed, their queues
// shown, and the manual clock moved by hand.

// Loop is what the server needs to pause, step and resume controllers; app implements it over
// the reconciler. Every method takes a controller's name, "" meaning every controller (for
// Step: the first, by name, with a key due). Errors are Status errors (an unknown name is a
// 404, a controller that does not run here a 503, nothing due to step a 409).
type Loop interface {
	// Controllers returns the state of the controllers (JSON-encodable): paused or not, and
	// their queues (each key, when it is next due, its failure count).
	Controllers(name string) (any, error)
	// Pause stops the controllers from taking new keys; keys being reconciled finish.
	Pause(name string) error
	// Resume lets them take keys again.
	Resume(name string) error
	// Step lets one due key through a paused controller (pausing it first if it runs), waits
	// for its reconcile to end and returns what it did (JSON-encodable).
	Step(ctx context.Context, name string) (any, error)
}

// ManualClock is a clock moved only by hand (CLOCK=manual); k8s.io/utils/clock/testing's
// FakeClock implements it. Step moves it forward by d and fires the timers now due.
type ManualClock interface {
	Step(d time.Duration)
}

// controllers serves GET /controller[?controller=name].
func (s *Server) controllers(c *echo.Context) error {
	if s.cfg.Loop == nil {
		return c.JSON(http.StatusOK, map[string]any{"now": s.clockNow(), "controllers": []any{}})
	}
	v, err := s.cfg.Loop.Controllers(c.QueryParam("controller"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"now": s.clockNow(), "controllers": v})
}

// controlLoop serves POST /controller/pause and /controller/resume: the state after.
func (s *Server) controlLoop(pause bool) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if s.cfg.Loop == nil {
			return controllerDisabled()
		}
		name := c.QueryParam("controller")
		var err error
		if pause {
			err = s.cfg.Loop.Pause(name)
		} else {
			err = s.cfg.Loop.Resume(name)
		}
		if err != nil {
			return err
		}
		return s.controllers(c)
	}
}

// stepLoop serves POST /controller/step: one key reconciled, then paused again.
func (s *Server) stepLoop(c *echo.Context) error {
	if s.cfg.Loop == nil {
		return controllerDisabled()
	}
	res, err := s.cfg.Loop.Step(c.Request().Context(), c.QueryParam("controller"))
	if err != nil {
		return err
	}
	v, err := s.cfg.Loop.Controllers(c.QueryParam("controller"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"step": res, "now": s.clockNow(), "controllers": v})
}

func controllerDisabled() error {
	return apierrors.NewServiceUnavailable("the controller is disabled (ENABLE_CONTROLLER=false)")
}

// clockState is what GET /clock answers.
type clockState struct {
	// Mode is "real" or "manual".
	Mode string `json:"mode"`
	// Now is the server's time (RFC 3339 with nanoseconds).
	Now string `json:"now"`
}

func (s *Server) clockNow() string { return s.cfg.Clock.Now().UTC().Format(time.RFC3339Nano) }

func (s *Server) clockState() clockState {
	mode := "real"
	if s.cfg.ManualClock != nil {
		mode = "manual"
	}
	return clockState{Mode: mode, Now: s.clockNow()}
}

// getClock serves GET /clock.
func (s *Server) getClock(c *echo.Context) error { return c.JSON(http.StatusOK, s.clockState()) }

// advanceClock serves POST /clock/advance {"by":"30s"}: the manual clock moves forward and
// every timer now due fires (requeues, backoff, rollout steps, resync, Event expiry).
func (s *Server) advanceClock(c *echo.Context) error {
	body, err := readBody(c)
	if err != nil {
		return err
	}
	var req struct {
		By string `json:"by"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return badRequest(`the body must be {"by": "<duration>"}, e.g. {"by": "30s"}: %v`, err)
	}
	d, err := time.ParseDuration(req.By)
	if err != nil || d <= 0 {
		return badRequest(`"by" must be a positive duration like 500ms, 30s or 5m, not %q`, req.By)
	}
	if s.cfg.ManualClock == nil {
		return &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusConflict, Reason: metav1.StatusReasonConflict,
			Message: "the clock is real; start opemu with CLOCK=manual to move time by hand",
		}}
	}
	s.cfg.ManualClock.Step(d)
	return c.JSON(http.StatusOK, s.clockState())
}
