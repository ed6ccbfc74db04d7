package server

import (
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Kubernetes watch protocol (`?watch=true`, SPEC §4.2): newline-delimited
// {"type","object"} events, flushed when the watcher's channel is drained.

// watchQuery is a parsed Kubernetes watch request.
type watchQuery struct {
	registry.ListOptions
	timeout           time.Duration // 0: until the client leaves
	bookmarks         bool
	sendInitialEvents *bool
}

func parseWatchQuery(c *echo.Context, t registry.Target) (watchQuery, error) {
	q := c.Request().URL.Query()
	lq, err := listQuery(q, t)
	if err != nil {
		return watchQuery{}, err
	}
	wq := watchQuery{ListOptions: lq}
	if wq.bookmarks, err = queryBool(q, "allowWatchBookmarks"); err != nil {
		return wq, err
	}
	if v := q.Get("timeoutSeconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return wq, badRequest("timeoutSeconds must be a non-negative integer, not %q", v)
		}
		wq.timeout = time.Duration(n) * time.Second
	}
	wq.sendInitialEvents, err = queryBoolPtr(q, "sendInitialEvents")
	return wq, err
}

// kubeWatch streams t's changes as the kube-apiserver does. A resourceVersion of "" or "0"
// starts with synthetic ADDED events for the current objects; N starts after N, or answers an
// ERROR event with a 410 Status when N is no longer (or never was) served.
func (s *Server) kubeWatch(c *echo.Context, t registry.Target) error {
	wq, err := parseWatchQuery(c, t)
	if err != nil {
		return err
	}
	opts := cache.WatchOptions{
		Resources: []cache.GroupResource{t.Key.GroupResource()},
		Namespace: t.Key.Namespace,
		Label:     wq.Label,
		Field:     wq.Field,
	}
	rv, _ := cache.ParseResourceVersion(wq.ResourceVersion)
	initialEnd := wq.sendInitialEvents != nil && *wq.sendInitialEvents
	switch {
	case wq.sendInitialEvents != nil:
		opts.SendInitialEvents = *wq.sendInitialEvents
		if !opts.SendInitialEvents {
			opts.ResourceVersion = rv
		}
	case rv == 0:
		opts.SendInitialEvents = true
	default:
		opts.ResourceVersion = rv
	}
	r := c.Request()
	release, err := s.acquireWatch()
	if err != nil {
		return err
	}
	defer release()
	if opts.SendInitialEvents && wq.ResourceVersion == "" {
		// "Get state and start at most recent": the state is a consistent read, as a list's.
		if err := s.cfg.Store.WaitUntilFresh(r.Context(), 0); err != nil {
			return err
		}
	}
	w, werr := s.cfg.Store.Watch(r.Context(), opts)
	if werr != nil && !errors.Is(werr, cache.ErrGone) {
		return werr
	}
	if w != nil {
		defer w.Stop()
	}
	s.cfg.Metrics.WatchStarted("kubernetes")
	defer s.cfg.Metrics.WatchEnded("kubernetes")

	resp := c.Response()
	resp.Header().Set("Content-Type", "application/json")
	resp.Header().Set("Cache-Control", "no-cache, private")
	resp.WriteHeader(http.StatusOK)
	fw, closeStream := s.openStream(resp)
	defer closeStream()
	kw := &kubeWriter{frameWriter: fw, kind: t.Kind.Kind, apiVersion: t.Kind.GroupVersion()}
	if t.Kind.Conversion != nil {
		kw.view = &t
	}
	if wantsTable(r) {
		kw.table, kw.includeObject, kw.now = t.Kind, c.QueryParam("includeObject"), s.cfg.Clock.Now
	}
	if werr != nil {
		_ = kw.status(s.toStatus(werr))
		return nil
	}
	if err := kw.flush(); err != nil {
		return nil
	}

	var timeout <-chan time.Time
	if wq.timeout > 0 {
		tm := time.NewTimer(wq.timeout)
		defer tm.Stop()
		timeout = tm.C
	}
	var bookmark <-chan time.Time
	if wq.bookmarks {
		tk := time.NewTicker(s.cfg.BookmarkInterval)
		defer tk.Stop()
		bookmark = tk.C
	}
	inj := faultOf(c)
	faulted, stopFault := watchFault(inj)
	defer stopFault()
	events := w.Events()
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				switch err := w.Err(); {
				case errors.Is(err, cache.ErrTooSlow):
					_ = kw.status(s.toStatus(apierrors.NewResourceExpired("watch fell behind; relist")))
				case errors.Is(err, cache.ErrGone):
					_ = kw.status(s.toStatus(err))
				}
				return nil
			}
			if ev.Type == cache.Bookmark {
				if initialEnd && wq.bookmarks {
					if kw.bookmark(ev.ResourceVersion, true) != nil {
						return nil
					}
				}
			} else if kw.event(ev) != nil {
				return nil
			}
			if len(events) == 0 && kw.flush() != nil {
				return nil
			}
		case <-bookmark:
			if rv, ok := w.Progress(); ok {
				if kw.bookmark(rv, false) != nil || kw.flush() != nil {
					return nil
				}
			}
		case <-timeout:
			if wq.bookmarks {
				if rv, ok := w.Progress(); ok {
					_ = kw.bookmark(rv, false)
					_ = kw.flush()
				}
			}
			return nil
		case <-faulted:
			// A Fault ends the stream (SPEC §16), with a 410 ERROR event when it expires it.
			if inj.Watch.Expire {
				_ = kw.status(s.toStatus(inj.ExpiredStatus()))
			}
			inj.WatchDone(true)
			return nil
		case <-s.stopWatches:
			return nil
		case <-r.Context().Done():
			return nil
		}
	}
}

// kubeWriter writes Kubernetes watch events.
type kubeWriter struct {
	*frameWriter
	kind, apiVersion string
	// view, when set, converts each object into a view kind (kinds.Conversion).
	view *registry.Target
	// table, when set, sends each object as a one-row Table; only the first carries the column
	// definitions, as kube-apiserver does.
	table         *kinds.Kind
	includeObject string
	now           func() time.Time
	headersSent   bool
}

func (kw *kubeWriter) event(ev cache.Event) error {
	obj := ev.Object.Raw()
	if kw.view != nil && kw.table == nil {
		var err error
		if obj, err = registry.View(*kw.view, ev.Object); err != nil {
			return err
		}
	}
	if kw.table != nil {
		tbl, err := table(kw.table, []*cache.Object{ev.Object}, metav1.ListMeta{ResourceVersion: strconv.FormatUint(ev.ResourceVersion, 10)}, kw.includeObject, !kw.headersSent, kw.now())
		if err != nil {
			return err
		}
		kw.headersSent = true
		if obj, err = json.Marshal(tbl); err != nil {
			return err
		}
	}
	b := &kw.buf
	b.Reset()
	b.WriteString(`{"type":"`)
	b.WriteString(string(ev.Type))
	b.WriteString(`","object":`)
	b.Write(obj)
	b.WriteString("}\n")
	return kw.write(b.Bytes())
}

// bookmark writes a BOOKMARK carrying only kind, apiVersion and the resourceVersion; the one
// ending the initial events is annotated k8s.io/initial-events-end.
func (kw *kubeWriter) bookmark(rv uint64, initialEnd bool) error {
	md := map[string]any{"resourceVersion": strconv.FormatUint(rv, 10)}
	if initialEnd {
		md["annotations"] = map[string]string{"k8s.io/initial-events-end": "true"}
	}
	obj, _ := json.Marshal(map[string]any{"kind": kw.kind, "apiVersion": kw.apiVersion, "metadata": md})
	b := &kw.buf
	b.Reset()
	b.WriteString(`{"type":"BOOKMARK","object":`)
	b.Write(obj)
	b.WriteString("}\n")
	return kw.write(b.Bytes())
}

// status writes an ERROR event holding st and flushes it.
func (kw *kubeWriter) status(st any) error {
	return kw.jsonFrame(`{"type":"ERROR","object":`, st, "}\n")
}
