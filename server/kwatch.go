package server

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// The Kubernetes watch protocol (`?watch=true`, SPEC §4.2): newline-delimited
// {"type","object"} events, served by the watch loop (watch.go).

// watchQuery is a parsed Kubernetes watch request.
type watchQuery struct {
	registry.WatchOptions
	timeout time.Duration // 0: until the client leaves
}

func parseWatchQuery(c *echo.Context, t registry.Target, forceWatch bool) (watchQuery, error) {
	opts, err := parseListQuery(c.Request().URL.Query(), t, forceWatch)
	if err != nil {
		return watchQuery{}, err
	}
	if _, err := cache.ParseResourceVersion(opts.ResourceVersion); err != nil {
		return watchQuery{}, unparsableResourceVersion(opts.ResourceVersion, err)
	}
	wq := watchQuery{WatchOptions: registry.WatchOptions{Label: opts.LabelSelector, Field: opts.FieldSelector, ResourceVersion: opts.ResourceVersion,
		SendInitialEvents: opts.SendInitialEvents, AllowWatchBookmarks: opts.AllowWatchBookmarks}}
	if name := c.Param("name"); name != "" {
		// A watch of one object (/watch/.../<name>) selects it by name, as kube-apiserver does.
		wq.Field, err = nameSelector(wq.Field, name)
		if err != nil {
			return wq, err
		}
	}
	if opts.TimeoutSeconds != nil {
		// A negative timeout ends the watch at once, as kube-apiserver's timer does.
		wq.timeout = max(time.Duration(*opts.TimeoutSeconds)*time.Second, time.Nanosecond)
	}
	return wq, nil
}

// nameSelector adds metadata.name=name to a watch's field selector; one that already selects
// another name is refused as kube-apiserver refuses it.
func nameSelector(sel fields.Selector, name string) (fields.Selector, error) {
	byName := fields.OneTermEqualSelector("metadata.name", name)
	if sel == nil || sel.Empty() {
		return byName, nil
	}
	if selected, ok := sel.RequiresExactMatch("metadata.name"); !ok || selected != name {
		return nil, apierrors.NewBadRequest("fieldSelector metadata.name doesn't match requested name")
	}
	return sel, nil
}

// kubeWatch streams t's changes as the kube-apiserver does (registry.Store.Watch says which):
// events, bookmarks every BookmarkInterval and just before a timeoutSeconds close when
// allowWatchBookmarks is set, and an ERROR event with a 410 Status when the watch cannot go on;
// in JSON lines or length-prefixed protobuf frames, each object as the client asked for it
// (itself, its PartialObjectMetadata, a one-row Table). forceWatch is a /watch/ path.
func (s *Server) kubeWatch(c *echo.Context, t registry.Target, forceWatch bool) error {
	out, err := negotiate(c.Request(), t.Kind, true)
	if err != nil {
		return err
	}
	wq, err := parseWatchQuery(c, t, forceWatch)
	if err != nil {
		return err
	}
	if out.as == asPartialList {
		// kube-apiserver starts such a watch and ends it at its first event, which it cannot
		// encode; this one ends before any.
		wq.timeout = time.Nanosecond
	}
	f := &kubeFrames{kind: t.Kind.Kind, apiVersion: t.Kind.GroupVersion(), out: out, k: t.Kind, typed: s.cfg.Kinds.Typed, now: s.cfg.Clock.Now}
	if out.as == asPartial {
		f.typed = typedAs[metav1.PartialObjectMetadata]()
	}
	if out.as == asTable {
		if f.includeObject, err = includeObject(c); err != nil {
			return err
		}
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
	kind, apiVersion string // the watched kind's, for bookmarks
	out              output
	k                *kinds.Kind
	typed            typedFunc // the Go value of an event's object, for protobuf frames
	includeObject    string
	now              func() time.Time
	// headersSent says a Table went out: only the first carries the column definitions, as
	// kube-apiserver does.
	headersSent bool
}

var _ watchFrames = (*kubeFrames)(nil)

func (kf *kubeFrames) header(h http.Header) {
	if kf.out.mediaType == protobufType {
		h.Set("Content-Type", protobufType+";stream=watch")
	} else {
		h.Set("Content-Type", jsonType)
	}
	h.Set("Cache-Control", "no-cache, private")
}

func (*kubeFrames) open(*frameWriter) error { return nil }

func (*kubeFrames) ping(*frameWriter) error { return nil }

// event writes one event around its object as the watched kind shows it, in the form asked
// for; the bookmark ending the initial events is annotated k8s.io/initial-events-end.
func (kf *kubeFrames) event(fw *frameWriter, ev registry.Event) error {
	if ev.Type == cache.Bookmark {
		return kf.writeBookmark(fw, ev.ResourceVersion, true)
	}
	raw, err := ev.JSON()
	if err != nil {
		return err
	}
	var src tableSource
	if kf.out.as == asTable {
		if src.obj, err = cache.DecodeJSON(raw); err != nil {
			return err
		}
	}
	src.raw = raw
	return kf.frame(fw, string(ev.Type), src, ev.ResourceVersion)
}

// bookmark writes a BOOKMARK at rv.
func (kf *kubeFrames) bookmark(fw *frameWriter, rv uint64) error {
	return kf.writeBookmark(fw, rv, false)
}

// writeBookmark writes a BOOKMARK: an object of the watched kind carrying only its kind,
// apiVersion and the resourceVersion (annotated k8s.io/initial-events-end when it ends the
// initial events), in the form asked for, as kube-apiserver transforms it too.
func (kf *kubeFrames) writeBookmark(fw *frameWriter, rv uint64, initialEnd bool) error {
	md := map[string]any{"resourceVersion": strconv.FormatUint(rv, 10)}
	if initialEnd {
		md["annotations"] = map[string]any{"k8s.io/initial-events-end": "true"}
	}
	obj := map[string]any{"kind": kf.kind, "apiVersion": kf.apiVersion, "metadata": md}
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return kf.frame(fw, "BOOKMARK", tableSource{obj: obj, raw: raw}, rv)
}

// frame writes one event of type typ around src's object (at version rv) in the form and
// media type negotiated.
func (kf *kubeFrames) frame(fw *frameWriter, typ string, src tableSource, rv uint64) error {
	obj := src.raw
	typed := kf.typed
	var err error
	switch kf.out.as {
	case asTable:
		tbl := table(kf.k, []tableSource{src}, metav1.ListMeta{ResourceVersion: strconv.FormatUint(rv, 10)}, kf.includeObject, kf.out.version, !kf.headersSent, kf.now())
		kf.headersSent = true
		if obj, err = json.Marshal(tbl); err != nil {
			return err
		}
	case asPartial:
		if obj, err = appendPartial(nil, src.raw, kf.out.version); err != nil {
			return err
		}
	}
	if kf.out.mediaType == protobufType {
		pb, _, err := encodeAs(protobufType, obj, typed)
		if err != nil {
			return err
		}
		return kf.protobufFrame(fw, typ, pb)
	}
	b := &fw.buf
	b.Reset()
	b.WriteString(`{"type":"`)
	b.WriteString(typ)
	b.WriteString(`","object":`)
	b.Write(obj)
	b.WriteString("}\n")
	return fw.write(b.Bytes())
}

// protobufFrame writes a watch event whose object is encoded (obj) as kube-apiserver's
// protobuf stream carries it: a metav1.WatchEvent, length-prefixed.
func (kf *kubeFrames) protobufFrame(fw *frameWriter, typ string, obj []byte) error {
	ev := metav1.WatchEvent{Type: typ, Object: runtime.RawExtension{Raw: obj}}
	data, err := ev.Marshal()
	if err != nil {
		return err
	}
	b := &fw.buf
	b.Reset()
	b.Grow(4 + len(data))
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	b.Write(n[:])
	b.Write(data)
	return fw.write(b.Bytes())
}

// status writes an ERROR event holding st and flushes it.
func (kf *kubeFrames) status(fw *frameWriter, st any) error {
	if kf.out.mediaType == protobufType {
		body, err := json.Marshal(st)
		if err != nil {
			return err
		}
		pb, _, err := encodeAs(protobufType, body, typedAs[metav1.Status]())
		if err != nil {
			return err
		}
		if err := kf.protobufFrame(fw, "ERROR", pb); err != nil {
			return err
		}
		return fw.flush()
	}
	return fw.jsonFrame(`{"type":"ERROR","object":`, st, "}\n")
}
