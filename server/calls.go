package server

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/calls"
)

// The record of calls (SPEC §21): observe fills one calls.Call per request from what the
// request guard and the handlers learned, and adds it to Config.Calls when the answer is sent.
// Handlers note what only they know (the resourceVersion read or written, a watch's events,
// a failure's reason) on callOf(c).

// callKey is the echo.Context store key of the request's *calls.Call. (The context's store is
// kept across requests, so setting it allocates nothing; echo clears it before the context's
// next request, and nothing reads it after observe returns, so endCall leaves it set.)
const callKey = "opemu.call"

// callPool recycles the Calls of requests, zeroed (the ring keeps a copy of each).
var callPool = sync.Pool{New: func() any { return new(calls.Call) }}

// recorded reports whether requests to path go in the record: everything but the record's own
// routes, the dashboard's files, health probes, metrics and pprof.
func recorded(path string) bool {
	if len(path) < 2 {
		return false
	}
	switch path[1] {
	case 'a', 'w', 'v', 'o': // /api, /apis, /watch, /version, /openapi: the usual ones, first
		return true
	}
	for _, p := range []string{callsPath, "/ui", "/healthz", "/livez", "/readyz", "/metrics", "/debug/"} {
		if strings.HasPrefix(path, p) {
			return false
		}
	}
	return true
}

// beginCall starts the Call of c's request, or returns nil when nothing is recorded.
func (s *Server) beginCall(c *echo.Context, start time.Time) *calls.Call {
	if s.cfg.Calls == nil || !recorded(c.Request().URL.Path) {
		return nil
	}
	call := callPool.Get().(*calls.Call)
	call.Start = start
	c.Set(callKey, call)
	return call
}

// callOf returns the Call of c's request (nil when it is not recorded).
func callOf(c *echo.Context) *calls.Call {
	call, _ := c.Get(callKey).(*calls.Call)
	return call
}

// endCall fills in what the request was and how it was answered, and records call (or, for
// a watch recorded when it opened, its end).
func (s *Server) endCall(c *echo.Context, call *calls.Call, code int, latency time.Duration) {
	fillCall(c, call, code, latency)
	if call.Open {
		call.Open = false
		s.cfg.Calls.Finish(call)
	} else {
		s.cfg.Calls.Add(call)
	}
	*call = calls.Call{}
	callPool.Put(call)
}

// openCall records the watch of c's request as its stream begins (its end is recorded by
// endCall): a watch may stay open for as long as the client runs.
func (s *Server) openCall(c *echo.Context) {
	call := callOf(c)
	if call == nil {
		return
	}
	fillCall(c, call, http.StatusOK, time.Since(call.Start))
	call.Open = true
	s.cfg.Calls.Add(call)
}

// fillCall fills in what c's request was and how it was answered.
func fillCall(c *echo.Context, call *calls.Call, code int, latency time.Duration) {
	r := c.Request()
	call.Latency = latency
	call.Code = int32(code)
	if u, ok := UserFrom(r.Context()); ok {
		call.User, call.UID, call.Groups = u.Name, u.UID, u.Groups
	}
	if ua := r.Header["User-Agent"]; len(ua) > 0 { // the canonical key: Header.Get would canonicalize it again
		call.UserAgent = ua[0]
	}
	call.SourceIP = r.RemoteAddr
	call.RequestURI = r.RequestURI
	var group, version, namespace, sub, name string
	for _, p := range c.PathValues() { // one pass, not a search per name
		switch p.Name {
		case "resource":
			call.Resource = p.Value
		case "group":
			group = p.Value
		case "version":
			version = p.Value
		case "namespace":
			namespace = p.Value
		case "sub":
			sub = p.Value
		case "name":
			name = p.Value
		}
	}
	if call.Resource != "" {
		call.APIGroup, call.APIVersion, call.Namespace, call.Subresource = group, version, namespace, sub
		if name != "" {
			call.Name = name // else the name of the object a create made (noteObject)
		}
		if isWrite(r.Method) && strings.Contains(r.URL.RawQuery, "fieldManager=") {
			call.FieldManager = c.QueryParam("fieldManager")
		}
	}
	call.Verb = kubeVerb(c, call)
}

// kubeVerb is the verb kube-apiserver's request-info resolver gives the request: a resource
// request's get, list, watch, create, update, patch, delete or deletecollection; the method in
// lower case for any other.
func kubeVerb(c *echo.Context, call *calls.Call) string {
	r := c.Request()
	if call.Resource == "" {
		return strings.ToLower(r.Method)
	}
	switch r.Method {
	case http.MethodGet:
		switch {
		case strings.Contains(c.Path(), "/watch/"):
			return "watch"
		case call.Name != "":
			return "get"
		case strings.Contains(r.URL.RawQuery, "watch") && isWatch(c): // parse the query only then
			return "watch"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if call.Name == "" {
			return "deletecollection"
		}
		return "delete"
	}
	return strings.ToLower(r.Method)
}

// noteObject records the resourceVersion of the object c's request produced or read, and the
// name of the object a create made (as kube-apiserver's audit log names it).
func noteObject(c *echo.Context, o *cache.Object) {
	if call := callOf(c); call != nil {
		call.ResourceVersion = o.ResourceVersion()
		if c.Request().Method == http.MethodPost {
			call.Name = o.Key().Name
		}
	}
}

// noteListRV records a list's resourceVersion (its ListMeta's).
func noteListRV(c *echo.Context, rv string) {
	if call := callOf(c); call != nil && rv != "" {
		call.ResourceVersion, _ = strconv.ParseUint(rv, 10, 64)
	}
}

// noteReason records the reason of the Status c's request was answered with.
func noteReason(c *echo.Context, reason string) {
	if call := callOf(c); call != nil {
		call.Reason = reason
	}
}

// noteBody passes the request body on to the record's sink (the audit log's level Request);
// the ring does not keep it.
func noteBody(c *echo.Context, body []byte) {
	if call := callOf(c); call != nil && len(body) > 0 {
		call.Body, call.BodyType = body, mediaType(c.Request())
	}
}
