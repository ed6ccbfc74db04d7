package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/faults"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Faults (SPEC §16) are applied here, in one place on the request path: after the guard and
// the limits, before any handler parses a body or calls the write path, so an injected error
// never changes stored state. Watches carry their Injection to the stream (faultOf).
//
// Delays and watch ends are transport timing, on the real clock like request deadlines: a
// manual clock (CLOCK=manual) must not hang clients until someone moves it.

// faultKey is where injectFaults leaves a watch's Injection in the echo context.
const faultKey = "opemu.fault"

// injectFaults asks the engine whether a client request is faulted and applies the answer: a
// delay, then an error Status instead of the request, or for a watch a stream that ends.
// Requests other than the API's resources and the SSE stream (discovery, health, metrics, the
// dashboard's files, opemu's own routes) are never faulted.
func (s *Server) injectFaults(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		if s.cfg.Faults == nil || !s.cfg.Faults.Any() {
			return next(c)
		}
		req, ok := s.faultRequest(c)
		if !ok {
			return next(c)
		}
		inj := s.cfg.Faults.Inject(req)
		if inj == nil {
			return next(c)
		}
		defer inj.WatchDone(false) // unless the stream was ended by the fault
		if inj.Delay > 0 {
			t := time.NewTimer(inj.Delay)
			select {
			case <-t.C:
			case <-c.Request().Context().Done():
				t.Stop()
				return apierrors.NewTimeoutError(fmt.Sprintf(
					"request did not complete within the allowed duration: Fault %q delays it by %v", inj.Fault, inj.Delay), 0)
			}
		}
		if inj.Err != nil {
			return inj.Err
		}
		if inj.Watch != nil {
			c.Set(faultKey, inj)
		}
		return next(c)
	}
}

// faultOf returns the watch Injection of the request, or nil.
func faultOf(c *echo.Context) *faults.Injection {
	inj, _ := c.Get(faultKey).(*faults.Injection)
	return inj
}

// faultRequest describes a request for matching, as RBAC would name its verb; ok is false for
// requests Faults never apply to.
func (s *Server) faultRequest(c *echo.Context) (faults.Request, bool) {
	r := c.Request()
	if c.Path() == "/watch" {
		q := r.URL.Query()
		res, err := s.sseResources(q.Get("kind"))
		if err != nil {
			return faults.Request{}, false // the handler answers 400
		}
		return faults.Request{Verb: faults.VerbWatch, Resources: res, Namespace: q.Get("namespace"), UserAgent: r.UserAgent()}, true
	}
	resource := c.Param("resource")
	sub, name := c.Param("sub"), c.Param("name")
	if resource == "" || sub == "history" || sub == "reconcile" {
		return faults.Request{}, false
	}
	var verb string
	switch r.Method {
	case http.MethodGet:
		switch {
		case name != "":
			verb = faults.VerbGet
		case isWatch(c):
			verb = faults.VerbWatch
		default:
			verb = faults.VerbList
		}
	case http.MethodPost:
		verb = faults.VerbCreate
	case http.MethodPut:
		verb = faults.VerbUpdate
	case http.MethodPatch:
		verb = faults.VerbPatch
	case http.MethodDelete:
		verb = faults.VerbDelete
		if name == "" {
			verb = faults.VerbDeleteCollection
		}
	default:
		return faults.Request{}, false
	}
	return faults.Request{
		Verb: verb, Group: c.Param("group"), Resource: resource, Subresource: sub,
		Namespace: c.Param("namespace"), Name: name, UserAgent: r.UserAgent(),
	}, true
}

// watchFault is the timer of a watch fault: it fires when the stream must end (nil channel
// when there is none). Stop it when the stream ends.
func watchFault(inj *faults.Injection) (<-chan time.Time, func()) {
	if inj == nil || inj.Watch == nil {
		return nil, func() {}
	}
	t := time.NewTimer(inj.Watch.CloseAfter)
	return t.C, func() { t.Stop() }
}
