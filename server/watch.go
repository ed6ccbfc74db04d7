package server

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/faults"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
)

// SSE (SPEC §5.1): frames are written directly, each under a write deadline, and flushed when
// the watcher's channel is drained. Fan-out, ordering and resume belong to the store.

// sseRetry is the reconnection delay browsers are told to use.
const sseRetry = "retry: 2000\n\n"

// sseWatch streams changes as Server-Sent Events.
func (s *Server) sseWatch(c *echo.Context) error {
	r := c.Request()
	opts, err := s.parseSSE(r)
	if err != nil {
		return err
	}
	release, err := s.acquireWatch()
	if err != nil {
		return err
	}
	defer release()
	if opts.SendInitialEvents && opts.ResourceVersion == 0 {
		// The snapshot is a consistent read, as a list's.
		if err := s.cfg.Store.WaitUntilFresh(r.Context(), 0); err != nil {
			return err
		}
	}
	w, err := s.cfg.Store.Watch(r.Context(), opts)
	var gone bool
	switch {
	case errors.Is(err, cache.ErrGone):
		gone = true
	case err != nil:
		return err
	default:
		defer w.Stop()
	}
	s.cfg.Metrics.WatchStarted("sse")
	defer s.cfg.Metrics.WatchEnded("sse")

	h := c.Response().Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	c.Response().WriteHeader(http.StatusOK)
	fw, closeStream := s.openStream(c.Response())
	defer closeStream()
	sw := &sseWriter{frameWriter: fw}
	if err := sw.write([]byte(sseRetry)); err != nil {
		return nil
	}
	if gone {
		_ = sw.errorFrame(s.toStatus(err))
		return nil
	}
	if err := sw.flush(); err != nil {
		return nil
	}
	s.streamSSE(r, w, sw, faultOf(c))
	return nil
}

// streamSSE copies events to the client until it leaves, the server shuts down, the watcher
// closes, or a Fault (inj, may be nil) ends the stream; a watcher closed for falling behind, or
// expired by a Fault, gets a 410 ERROR frame first.
func (s *Server) streamSSE(r *http.Request, w *cache.Watcher, sw *sseWriter, inj *faults.Injection) {
	ping := time.NewTicker(s.cfg.Heartbeat)
	defer ping.Stop()
	faulted, stopFault := watchFault(inj)
	defer stopFault()
	events := w.Events()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				switch err := w.Err(); {
				case errors.Is(err, cache.ErrTooSlow):
					_ = sw.errorFrame(s.toStatus(apierrors.NewResourceExpired("watch fell behind; relist")))
				case errors.Is(err, cache.ErrGone):
					_ = sw.errorFrame(s.toStatus(err))
				}
				return
			}
			if ev.Type != cache.Bookmark {
				if err := sw.event(ev); err != nil {
					return
				}
			}
			if len(events) == 0 {
				if err := sw.flush(); err != nil {
					return
				}
			}
		case <-ping.C:
			if sw.write([]byte(": ping\n\n")) != nil || sw.flush() != nil {
				return
			}
		case <-faulted:
			if inj.Watch.Expire {
				_ = sw.errorFrame(s.toStatus(inj.ExpiredStatus()))
			}
			inj.WatchDone(true)
			return
		case <-s.stopWatches:
			return
		case <-r.Context().Done():
			return
		}
	}
}

// sseWriter writes SSE frames.
type sseWriter struct{ *frameWriter }

// event writes `id: <rv>` and `data: {"type":...,"object":...}` around the object's shared bytes.
func (sw *sseWriter) event(ev cache.Event) error {
	b := &sw.buf
	b.Reset()
	b.WriteString("id: ")
	b.WriteString(strconv.FormatUint(ev.ResourceVersion, 10))
	b.WriteString("\ndata: {\"type\":\"")
	b.WriteString(string(ev.Type))
	b.WriteString("\",\"object\":")
	b.Write(ev.Object.Raw())
	b.WriteString("}\n\n")
	return sw.write(b.Bytes())
}

// errorFrame writes an ERROR frame holding st with an empty id, so a browser reconnects from
// now rather than from a version that cannot be served, and flushes it.
func (sw *sseWriter) errorFrame(st any) error {
	return sw.jsonFrame("id:\ndata: {\"type\":\"ERROR\",\"object\":", st, "}\n\n")
}

// parseSSE turns the query and Last-Event-ID into watch options. Parsing only.
func (s *Server) parseSSE(r *http.Request) (cache.WatchOptions, error) {
	q := r.URL.Query()
	var opts cache.WatchOptions
	if err := checkSelectorSizes(q); err != nil {
		return opts, err
	}
	var err error
	if opts.Resources, err = s.sseResources(q.Get("kind")); err != nil {
		return opts, err
	}
	opts.Namespace = q.Get("namespace")
	if sel := q.Get("labelSelector"); sel != "" {
		if opts.Label, err = labels.Parse(sel); err != nil {
			return opts, badRequest("unable to parse labelSelector: %v", err)
		}
	}
	if opts.SendInitialEvents, err = queryBool(q, "initial"); err != nil {
		return opts, err
	}
	if v := q.Get("resourceVersion"); v != "" && v != "0" {
		if opts.ResourceVersion, err = cache.ParseResourceVersion(v); err != nil {
			return opts, badRequest("resourceVersion %q is not a valid resource version", v)
		}
	}
	if id := strings.TrimSpace(r.Header.Get("Last-Event-ID")); id != "" {
		if opts.ResourceVersion, err = cache.ParseResourceVersion(id); err != nil || opts.ResourceVersion == 0 {
			return opts, badRequest("Last-Event-ID %q is not a valid resource version", id)
		}
		// A browser resuming a stream it opened with initial=true wants what it missed, not the
		// snapshot again.
		opts.SendInitialEvents = false
	}
	return opts, nil
}

// sseResources resolves the `kind` parameter: "" means every custom resource kind, "all" means
// everything, otherwise a comma-separated list of kinds (by kind, plural, singular or short
// name, any case).
func (s *Server) sseResources(names string) ([]cache.GroupResource, error) {
	if names == "" {
		var out []cache.GroupResource
		for _, k := range s.cfg.Kinds.Custom() {
			out = appendUnique(out, k.GroupResource())
		}
		return out, nil
	}
	var out []cache.GroupResource
	for _, name := range strings.Split(names, ",") {
		if strings.EqualFold(strings.TrimSpace(name), "all") {
			return nil, nil
		}
		grs := s.cfg.Kinds.Resolve(name)
		if len(grs) == 0 {
			return nil, badRequest("unknown kind %q: use a custom resource kind, Event, Lease, Namespace or all", strings.ToLower(strings.TrimSpace(name)))
		}
		for _, gr := range grs {
			out = appendUnique(out, gr)
		}
	}
	return out, nil
}

func appendUnique(l []cache.GroupResource, gr cache.GroupResource) []cache.GroupResource {
	for _, x := range l {
		if x == gr {
			return l
		}
	}
	return append(l, gr)
}
