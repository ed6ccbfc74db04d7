package server

import (
	"context"
	"net/http"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/faults"
	"github.com/opemu/opemu/registry"
)

// Watches (SPEC §4.2 and §5) are served by one loop for both protocols: the Kubernetes watch
// (`?watch=true`, kwatch.go) and SSE (`/watch`, sse.go), each a watchFrames that encodes its
// frames. Which events a watch gets, from which version, and as which kind is the registry's
// (registry.Watcher); fan-out and ordering are the store's. The loop owns what is transport:
// MAX_WATCHES, frames written under a deadline and flushed when the watcher's channel is
// drained, bookmarks, heartbeats, timeouts, a Fault's end of the stream, and shutdown.

// watchFrames is one protocol's framing. Each method writes one frame through fw; status also
// flushes it. The loop calls them from the stream's goroutine only.
type watchFrames interface {
	// header sets the response's headers.
	header(h http.Header)
	// open writes what begins the stream, if anything.
	open(fw *frameWriter) error
	// event writes one event of the watch.
	event(fw *frameWriter, ev registry.Event) error
	// bookmark writes a bookmark at rv (only called when watchTiming.bookmarks is set).
	bookmark(fw *frameWriter, rv uint64) error
	// ping writes a heartbeat (only called when watchTiming.heartbeat is set).
	ping(fw *frameWriter) error
	// status writes an ERROR frame holding st and flushes it.
	status(fw *frameWriter, st any) error
}

// watchTiming is when a stream writes without an event. Zero durations mean never.
type watchTiming struct {
	bookmarks time.Duration // a bookmark this often, and one just before timeout ends the stream
	heartbeat time.Duration // a ping this often
	timeout   time.Duration // the stream ends this long after it began
}

// serveWatch serves one watch (which holds a place among MAX_WATCHES: the limit middleware
// took it): it starts the watch (start's error is answered as a Status, before any frame),
// then streams it until the client leaves, the server shuts down, the watch ends, the timeout
// passes or a Fault ends it.
func (s *Server) serveWatch(c *echo.Context, protocol string, start func(context.Context) (*registry.Watcher, error), frames watchFrames, tm watchTiming) error {
	r := c.Request()
	w, err := start(r.Context())
	if err != nil {
		return err
	}
	defer w.Stop()
	s.cfg.Metrics.WatchStarted(protocol)
	defer s.cfg.Metrics.WatchEnded(protocol)

	resp := c.Response()
	frames.header(resp.Header())
	s.openCall(c) // on record before the client can know the watch began
	resp.WriteHeader(http.StatusOK)
	fw, closeStream := s.openStream(resp)
	defer closeStream()
	if frames.open(fw) != nil || fw.flush() != nil {
		return nil
	}
	events := s.stream(r.Context(), w, fw, frames, tm, faultOf(c))
	if call := callOf(c); call != nil {
		call.WatchEvents = events
	}
	return nil // once streaming, every end is a normal end of the response
}

// stream copies w's events to the client until the stream must end (see serveWatch). A watch
// the registry ends with an error (it fell behind, it could not start at its version, its
// cache was refilled), or one a Fault expires, gets an ERROR frame with the 410 first. It
// returns how many events it wrote.
func (s *Server) stream(ctx context.Context, w *registry.Watcher, fw *frameWriter, f watchFrames, tm watchTiming, inj *faults.Injection) (sent int64) {
	bookmark, stopBookmarks := ticker(tm.bookmarks)
	defer stopBookmarks()
	ping, stopPings := ticker(tm.heartbeat)
	defer stopPings()
	var timeout <-chan time.Time
	if tm.timeout > 0 {
		t := time.NewTimer(tm.timeout)
		defer t.Stop()
		timeout = t.C
	}
	faulted, stopFault := watchFault(inj)
	defer stopFault()
	events := w.Events()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				if err := w.Err(); err != nil {
					_ = f.status(fw, s.toStatus(err))
				}
				return
			}
			wrote, err := deliver(w, fw, f, ev, len(events) == 0)
			if wrote {
				sent++
			}
			if err != nil {
				return
			}
		case <-bookmark:
			if progress(w, fw, f) != nil {
				return
			}
		case <-ping:
			if f.ping(fw) != nil || fw.flush() != nil {
				return
			}
		case <-timeout:
			if tm.bookmarks > 0 {
				_ = progress(w, fw, f)
			}
			return
		case <-faulted:
			// A Fault ends the stream (SPEC §16), with a 410 ERROR event when it expires it.
			if inj.Watch.Expire {
				_ = f.status(fw, s.toStatus(inj.ExpiredStatus()))
			}
			inj.WatchDone(true)
			return
		case <-s.stopWatches:
			return
		case <-ctx.Done():
			return
		}
	}
}

// deliver writes ev if the client wants it (wrote), and flushes when no event follows
// (drained).
func deliver(w *registry.Watcher, fw *frameWriter, f watchFrames, ev cache.Event, drained bool) (wrote bool, err error) {
	if ev, wanted := w.Event(ev); wanted {
		if err := f.event(fw, ev); err != nil {
			return false, err
		}
		wrote = true
	}
	if drained {
		return wrote, fw.flush()
	}
	return wrote, nil
}

// progress writes and flushes a bookmark when the client has every event up to the store's
// version (otherwise the events on their way say more).
func progress(w *registry.Watcher, fw *frameWriter, f watchFrames) error {
	rv, ok := w.Progress()
	if !ok {
		return nil
	}
	if err := f.bookmark(fw, rv); err != nil {
		return err
	}
	return fw.flush()
}

// ticker is a time.Ticker's channel, or nil (never ready) when d is zero; stop it when done.
func ticker(d time.Duration) (<-chan time.Time, func()) {
	if d <= 0 {
		return nil, func() {}
	}
	t := time.NewTicker(d)
	return t.C, t.Stop
}
