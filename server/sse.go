package server

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/registry"
	"k8s.io/apimachinery/pkg/labels"
)

// SSE (SPEC §5.1): opemu's own stream of stored objects, `id:` and `data:` frames with a
// `retry:` first and `: ping` heartbeats, served by the watch loop (watch.go).

// sseRetry is the reconnection delay browsers are told to use.
const sseRetry = "retry: 2000\n\n"

// sseWatch streams changes as Server-Sent Events.
func (s *Server) sseWatch(c *echo.Context) error {
	opts, err := s.parseSSE(c.Request())
	if err != nil {
		return err
	}
	return s.serveWatch(c, "sse", func(ctx context.Context) (*registry.Watcher, error) {
		return s.cfg.Registry.WatchResources(ctx, opts)
	}, sseFrames{}, watchTiming{heartbeat: s.cfg.Heartbeat})
}

// sseFrames writes SSE frames.
type sseFrames struct{}

var _ watchFrames = sseFrames{}

func (sseFrames) header(h http.Header) {
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
}

func (sseFrames) open(fw *frameWriter) error { return fw.write([]byte(sseRetry)) }

// event writes `id: <rv>` and `data: {"type":...,"object":...}` around the object's shared bytes.
func (sseFrames) event(fw *frameWriter, ev registry.Event) error {
	obj, err := ev.JSON()
	if err != nil {
		return err
	}
	b := &fw.buf
	b.Reset()
	b.WriteString("id: ")
	b.WriteString(strconv.FormatUint(ev.ResourceVersion, 10))
	b.WriteString("\ndata: {\"type\":\"")
	b.WriteString(string(ev.Type))
	b.WriteString("\",\"object\":")
	b.Write(obj)
	b.WriteString("}\n\n")
	return fw.write(b.Bytes())
}

// bookmark writes nothing: SSE clients resume from the last id.
func (sseFrames) bookmark(*frameWriter, uint64) error { return nil }

func (sseFrames) ping(fw *frameWriter) error { return fw.write([]byte(": ping\n\n")) }

// status writes an ERROR frame holding st with an empty id, so a browser reconnects from
// now rather than from a version that cannot be served, and flushes it.
func (sseFrames) status(fw *frameWriter, st any) error {
	return fw.jsonFrame("id:\ndata: {\"type\":\"ERROR\",\"object\":", st, "}\n\n")
}

// parseSSE turns the query and Last-Event-ID into the watch's options. Parsing only.
func (s *Server) parseSSE(r *http.Request) (registry.ResourcesOptions, error) {
	q := r.URL.Query()
	var opts registry.ResourcesOptions
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
	if opts.Initial, err = queryBool(q, "initial"); err != nil {
		return opts, err
	}
	if v := q.Get("resourceVersion"); v != "" && v != "0" {
		if opts.After, err = cache.ParseResourceVersion(v); err != nil {
			return opts, badRequest("resourceVersion %q is not a valid resource version", v)
		}
	}
	if id := strings.TrimSpace(r.Header.Get("Last-Event-ID")); id != "" {
		if opts.After, err = cache.ParseResourceVersion(id); err != nil || opts.After == 0 {
			return opts, badRequest("Last-Event-ID %q is not a valid resource version", id)
		}
		// A browser resuming a stream it opened with initial=true wants what it missed, not the
		// snapshot again.
		opts.Initial = false
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
