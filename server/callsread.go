package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/calls"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reading the record of calls (SPEC §21): GET /calls (JSON, or a Table for kubectl), its SSE
// stream, and the least-privilege roles of one user.

const (
	callsPath       = "/calls"
	callsStreamPath = "/calls/stream"
	callsRBACPath   = "/calls/rbac"
)

// record returns the record, or a 404 when none is kept (CALL_HISTORY=0).
func (s *Server) record() (*calls.Record, error) {
	if s.cfg.Calls == nil {
		return nil, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
			Reason: metav1.StatusReasonNotFound, Message: "the record of calls is off (CALL_HISTORY=0)"}}
	}
	return s.cfg.Calls, nil
}

// recordAndFilter returns the record (see record) and the request's filter.
func (s *Server) recordAndFilter(c *echo.Context) (*calls.Record, calls.Filter, error) {
	rec, err := s.record()
	if err != nil {
		return nil, calls.Filter{}, err
	}
	f, err := calls.ParseFilter(c.QueryParams(), s.cfg.Clock.Now())
	if err != nil {
		return nil, f, badRequest("%v", err)
	}
	return rec, f, nil
}

// listCalls answers GET /calls.
func (s *Server) listCalls(c *echo.Context) error {
	rec, f, err := s.recordAndFilter(c)
	if err != nil {
		return err
	}
	out, ok := negotiateFor(c.Request().Header.Get("Accept"), func(mt string, o output) bool {
		return mt == jsonType && (o.as == "" || o.as == asTable)
	})
	if !ok {
		return notAcceptable([]string{jsonType})
	}
	cs := rec.List(f)
	if out.as == asTable {
		return c.JSON(http.StatusOK, calls.Table(cs, out.version))
	}
	return c.JSON(http.StatusOK, calls.NewList(cs, rec.Size(), rec.Last()))
}

// streamCalls answers GET /calls/stream: Server-Sent Events, one `id: <call ID>` and
// `data: <call JSON>` frame per new call the filter matches, from the call after Last-Event-ID
// (or ?after=) when given and still in the ring, with `: ping` heartbeats. A client too slow for
// the calls is told so (`event: missed`) and the stream goes on.
func (s *Server) streamCalls(c *echo.Context) error {
	rec, f, err := s.recordAndFilter(c)
	if err != nil {
		return err
	}
	if id := c.Request().Header.Get("Last-Event-ID"); id != "" {
		if f.After, err = strconv.ParseUint(id, 10, 64); err != nil {
			return badRequest("Last-Event-ID %q is not a call ID", id)
		}
	}
	sub := rec.Subscribe(f, 1024)
	defer sub.Close()
	var backlog []calls.Call
	if f.After != 0 {
		backlog = rec.List(f) // after subscribing: nothing between them is lost
	}
	resp := c.Response()
	sseFrames{}.header(resp.Header())
	resp.WriteHeader(http.StatusOK)
	fw, closeStream := s.openStream(resp)
	defer closeStream()
	if fw.write([]byte(sseRetry)) != nil {
		return nil
	}
	sent := f.After
	for i := range backlog {
		if writeCallFrame(fw, &backlog[i]) != nil {
			return nil
		}
		sent = backlog[i].ID
	}
	if fw.flush() != nil {
		return nil
	}
	ping, stopPings := ticker(s.cfg.Heartbeat)
	defer stopPings()
	var missed int64
	ctx := c.Request().Context()
	for {
		select {
		case call := <-sub.C:
			if call.ID <= sent && (call.Open || call.Verb != "watch") {
				continue // already sent from the backlog (a watch's end is new)
			}
			sent = max(sent, call.ID)
			if writeCallFrame(fw, &call) != nil {
				return nil
			}
			if m := sub.Missed(); m != missed {
				missed = m
				if fw.write([]byte("event: missed\ndata: "+strconv.FormatInt(m, 10)+"\n\n")) != nil {
					return nil
				}
			}
			if len(sub.C) == 0 && fw.flush() != nil {
				return nil
			}
		case <-ping:
			if fw.write([]byte(": ping\n\n")) != nil || fw.flush() != nil {
				return nil
			}
		case <-s.stopWatches:
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// writeCallFrame writes call as one SSE frame.
func writeCallFrame(fw *frameWriter, call *calls.Call) error {
	return fw.jsonFrame("id: "+strconv.FormatUint(call.ID, 10)+"\ndata: ", call.View(), "\n\n")
}

// callsRBAC answers GET /calls/rbac?user=NAME[&names=true]: the Roles and ClusterRole (YAML)
// that allow exactly what the user was seen doing.
func (s *Server) callsRBAC(c *echo.Context) error {
	rec, err := s.record()
	if err != nil {
		return err
	}
	user := c.QueryParam("user")
	if user == "" {
		return badRequest("user is required: the user whose calls the roles allow")
	}
	names, err := queryBool(c.QueryParams(), "names")
	if err != nil {
		return err
	}
	roles := calls.Generate(user, rec.List(calls.Filter{User: user}), calls.RoleOptions{Names: names, Name: c.QueryParam("name")})
	if c.QueryParam("output") == "json" {
		var b bytes.Buffer
		if err := json.NewEncoder(&b).Encode(roles); err != nil {
			return err
		}
		return c.Blob(http.StatusOK, jsonType, b.Bytes())
	}
	y, err := roles.YAML()
	if err != nil {
		return err
	}
	return c.Blob(http.StatusOK, yamlType, y)
}
