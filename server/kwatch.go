package server

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The Kubernetes watch protocol (`?watch=true`, SPEC §4.2): newline-delimited
// {"type","object"} events, served by the watch loop (watch.go).

// watchQuery is a parsed Kubernetes watch request.
type watchQuery struct {
	registry.WatchOptions
	timeout time.Duration // 0: until the client leaves
}

func parseWatchQuery(c *echo.Context, t registry.Target) (watchQuery, error) {
	q := c.Request().URL.Query()
	lq, err := parseListQuery(q, t.Kind.Selectable)
	if err != nil {
		return watchQuery{}, err
	}
	wq := watchQuery{WatchOptions: registry.WatchOptions{Label: lq.Label, Field: lq.Field, ResourceVersion: lq.ResourceVersion}}
	if wq.AllowWatchBookmarks, err = queryBool(q, "allowWatchBookmarks"); err != nil {
		return wq, err
	}
	if v := q.Get("timeoutSeconds"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return wq, badRequest("timeoutSeconds must be a non-negative integer, not %q", v)
		}
		wq.timeout = time.Duration(n) * time.Second
	}
	wq.SendInitialEvents, err = queryBoolPtr(q, "sendInitialEvents")
	return wq, err
}

// kubeWatch streams t's changes as the kube-apiserver does (registry.Store.Watch says which):
// events, bookmarks every BookmarkInterval and just before a timeoutSeconds close when
// allowWatchBookmarks is set, and an ERROR event with a 410 Status when the watch cannot go on.
func (s *Server) kubeWatch(c *echo.Context, t registry.Target) error {
	wq, err := parseWatchQuery(c, t)
	if err != nil {
		return err
	}
	f := &kubeFrames{kind: t.Kind.Kind, apiVersion: t.Kind.GroupVersion()}
	if wantsTable(c.Request()) {
		f.table, f.includeObject, f.now = t.Kind, c.QueryParam("includeObject"), s.cfg.Clock.Now
	}
	tm := watchTiming{timeout: wq.timeout}
	if wq.AllowWatchBookmarks {
		tm.bookmarks = s.cfg.BookmarkInterval
	}
	return s.serveWatch(c, "kubernetes", func(ctx context.Context) (*registry.Watcher, error) {
		return s.cfg.Registry.Watch(ctx, t, wq.WatchOptions)
	}, f, tm)
}

// kubeFrames writes Kubernetes watch events.
type kubeFrames struct {
	kind, apiVersion string
	// table, when set, sends each object as a one-row Table; only the first carries the column
	// definitions, as kube-apiserver does.
	table         *kinds.Kind
	includeObject string
	now           func() time.Time
	headersSent   bool
}

var _ watchFrames = (*kubeFrames)(nil)

func (*kubeFrames) header(h http.Header) {
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache, private")
}

func (*kubeFrames) open(*frameWriter) error { return nil }

func (*kubeFrames) ping(*frameWriter) error { return nil }

// event writes {"type":...,"object":...} around the object as the watched kind shows it (a
// Table row when asked for); the bookmark ending the initial events is annotated
// k8s.io/initial-events-end.
func (kf *kubeFrames) event(fw *frameWriter, ev registry.Event) error {
	if ev.Type == cache.Bookmark {
		return kf.writeBookmark(fw, ev.ResourceVersion, true)
	}
	var obj []byte
	var err error
	if kf.table != nil {
		tbl, err := table(kf.table, []*cache.Object{ev.Object}, metav1.ListMeta{ResourceVersion: strconv.FormatUint(ev.ResourceVersion, 10)}, kf.includeObject, !kf.headersSent, kf.now())
		if err != nil {
			return err
		}
		kf.headersSent = true
		if obj, err = json.Marshal(tbl); err != nil {
			return err
		}
	} else if obj, err = ev.JSON(); err != nil {
		return err
	}
	b := &fw.buf
	b.Reset()
	b.WriteString(`{"type":"`)
	b.WriteString(string(ev.Type))
	b.WriteString(`","object":`)
	b.Write(obj)
	b.WriteString("}\n")
	return fw.write(b.Bytes())
}

// bookmark writes a BOOKMARK at rv.
func (kf *kubeFrames) bookmark(fw *frameWriter, rv uint64) error {
	return kf.writeBookmark(fw, rv, false)
}

// writeBookmark writes a BOOKMARK carrying only kind, apiVersion and the resourceVersion; the
// one ending the initial events is annotated k8s.io/initial-events-end.
func (kf *kubeFrames) writeBookmark(fw *frameWriter, rv uint64, initialEnd bool) error {
	md := map[string]any{"resourceVersion": strconv.FormatUint(rv, 10)}
	if initialEnd {
		md["annotations"] = map[string]string{"k8s.io/initial-events-end": "true"}
	}
	obj, _ := json.Marshal(map[string]any{"kind": kf.kind, "apiVersion": kf.apiVersion, "metadata": md})
	b := &fw.buf
	b.Reset()
	b.WriteString(`{"type":"BOOKMARK","object":`)
	b.Write(obj)
	b.WriteString("}\n")
	return fw.write(b.Bytes())
}

// status writes an ERROR event holding st and flushes it.
func (*kubeFrames) status(fw *frameWriter, st any) error {
	return fw.jsonFrame(`{"type":"ERROR","object":`, st, "}\n")
}
