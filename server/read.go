package server

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/internal/jsonfast"
	"github.com/opemu/opemu/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metainternalversionvalidation "k8s.io/apimachinery/pkg/apis/meta/internalversion/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// parseListQuery parses a list or watch query as kube-apiserver does: apimachinery's
// parameter codec (its 400s for a limit, a timeout or a selector that does not parse), the
// watch-list defaults (a watch from "" or "0" sends its initial events, then their bookmark
// when bookmarks are allowed), ListOptions' validation (422s naming ListOptions), then the
// kind's field labels (400). The boolean flags keep opemu's stricter spellings (queryBool).
// forceWatch is a /watch/ path.
func parseListQuery(q url.Values, t registry.Target, forceWatch bool) (metainternalversion.ListOptions, error) {
	var opts metainternalversion.ListOptions
	if err := checkSelectorSizes(q); err != nil {
		return opts, err
	}
	watch, err := queryBool(q, "watch")
	if err != nil {
		return opts, err
	}
	bookmarks, err := queryBool(q, "allowWatchBookmarks")
	if err != nil {
		return opts, err
	}
	initial, err := queryBoolPtr(q, "sendInitialEvents")
	if err != nil {
		return opts, err
	}
	if len(q) > 0 { // (no parameters decode to none)
		if err := metainternalversionscheme.ParameterCodec.DecodeParameters(q, metav1.SchemeGroupVersion, &opts); err != nil {
			return opts, apierrors.NewBadRequest(err.Error())
		}
	}
	opts.Watch, opts.AllowWatchBookmarks, opts.SendInitialEvents = watch || forceWatch, bookmarks, initial
	metainternalversion.SetListOptionsDefaults(&opts, true)
	if errs := metainternalversionvalidation.ValidateListOptions(&opts, true); len(errs) > 0 {
		return opts, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "ListOptions"}, "", errs)
	}
	if opts.FieldSelector != nil {
		if opts.FieldSelector, err = opts.FieldSelector.Transform(t.Kind.ConvertFieldLabel); err != nil {
			return opts, apierrors.NewBadRequest(err.Error())
		}
	}
	return opts, nil
}

// listQuery parses t's list query (a view's field names are the registry's to rename).
func listQuery(q url.Values, t registry.Target) (registry.ListOptions, error) {
	opts, err := parseListQuery(q, t, false)
	if err != nil {
		return registry.ListOptions{}, err
	}
	if _, err := cache.ParseResourceVersion(opts.ResourceVersion); err != nil {
		return registry.ListOptions{}, badRequest("invalid resource version: %v", invalidResourceVersion(opts.ResourceVersion, err))
	}
	return registry.ListOptions{
		Label: opts.LabelSelector, Field: opts.FieldSelector, Limit: int(max(opts.Limit, 0)), Continue: opts.Continue,
		ResourceVersion: opts.ResourceVersion, ResourceVersionMatch: string(opts.ResourceVersionMatch),
	}, nil
}

// invalidResourceVersion is storage's complaint about a resourceVersion that is not a number.
func invalidResourceVersion(rv string, err error) error {
	return field.ErrorList{field.Invalid(field.NewPath("resourceVersion"), rv, err.Error())}.ToAggregate()
}

// unparsableResourceVersion is the 500 kube-apiserver answers a get or a watch whose
// resourceVersion is not a number: storage's error, which is no Status.
func unparsableResourceVersion(rv string, err error) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
		Message: invalidResourceVersion(rv, err).Error()}}
}

// answerList sends a list of t's kind in the negotiated form: the <Kind>List (JSON streamed
// around the stored objects' shared bytes, not re-encoded nor gathered whole first), its
// PartialObjectMetadataList, or a Table.
func (s *Server) answerList(c *echo.Context, t registry.Target, meta metav1.ListMeta, items []*cache.Object, out output) error {
	noteListRV(c, meta.ResourceVersion)
	switch out.as {
	case asTable:
		return s.answerTable(c, http.StatusOK, t, items, meta, out)
	case asPartial:
		return wrongShape(asPartial, t.Kind, true)
	}
	if out.mediaType == jsonType && !t.Kind.ConvertsReads() {
		// Streamed: nothing can fail once the status line is sent (a view's conversion can).
		w := c.Response()
		w.Header().Set(echo.HeaderContentType, jsonType)
		w.WriteHeader(http.StatusOK)
		bw := bufio.NewWriterSize(w, 32<<10)
		if err := writeListJSON(bw, t, meta, items, out); err != nil {
			return nil // the status line is sent: the client sees a truncated answer
		}
		// A failure here is the client going away: the status line is already sent.
		return bw.Flush()
	}
	var buf bytes.Buffer
	if err := writeListJSON(&buf, t, meta, items, out); err != nil {
		return err
	}
	typed := s.cfg.Kinds.Typed
	if out.as == asPartialList {
		typed = typedAs[metav1.PartialObjectMetadataList]()
	}
	return writeAs(c, http.StatusOK, out.mediaType, buf.Bytes(), typed)
}

// listWriter is where a list's JSON goes (the response's buffer, or a buffer to convert).
type listWriter interface {
	io.Writer
	io.ByteWriter
	io.StringWriter
}

// writeListJSON writes the JSON of t's list of items as kube-apiserver encodes it: a built-in
// kind's items without their apiVersion and kind (as its typed lists leave them out), a
// custom resource's as stored, with metadata.continue "" on its last page (as its
// unstructured lists carry it); or the PartialObjectMetadataList of the items.
func writeListJSON(w listWriter, t registry.Target, meta metav1.ListMeta, items []*cache.Object, out output) error {
	apiVersion, kind := t.Kind.GroupVersion(), t.Kind.ListKind
	if out.as == asPartialList {
		apiVersion, kind = out.asAPIVersion(), asPartialList
	}
	var m []byte
	var err error
	if out.as == "" && !t.Kind.BuiltIn() {
		m, err = json.Marshal(unstructuredListMeta{Continue: meta.Continue, RemainingItemCount: meta.RemainingItemCount, ResourceVersion: meta.ResourceVersion})
	} else {
		m, err = json.Marshal(meta)
	}
	if err != nil {
		return err
	}
	w.WriteString(`{"apiVersion":`)
	w.Write(jsonfast.AppendString(nil, apiVersion))
	w.WriteString(`,"items":[`)
	var scratch []byte
	for i, o := range items {
		if i > 0 {
			w.WriteByte(',')
		}
		raw := o.Raw()
		if t.Kind.ConvertsReads() {
			if raw, err = registry.ListView(t, o); err != nil {
				return err
			}
		}
		switch {
		case out.as == asPartialList:
			if scratch, err = appendPartial(scratch[:0], raw, out.version); err != nil {
				return err
			}
			raw = scratch
		case t.Kind.BuiltIn():
			if scratch, err = appendWithoutTypeMeta(scratch[:0], raw); err != nil {
				return err
			}
			raw = scratch
		}
		if _, err := w.Write(raw); err != nil {
			return err
		}
	}
	w.WriteString(`],"kind":`)
	w.Write(jsonfast.AppendString(nil, kind))
	w.WriteString(`,"metadata":`)
	w.Write(m)
	_, err = w.WriteString("}")
	return err
}

// unstructuredListMeta is the metadata of a custom resource's list, which always carries
// continue.
type unstructuredListMeta struct {
	Continue           string `json:"continue"`
	RemainingItemCount *int64 `json:"remainingItemCount,omitempty"`
	ResourceVersion    string `json:"resourceVersion,omitempty"`
}

// appendWithoutTypeMeta appends the object whose JSON is raw without its apiVersion and kind,
// straight from the bytes when jsonfast can vouch for them.
func appendWithoutTypeMeta(dst, raw []byte) ([]byte, error) {
	if out, ok := jsonfast.AppendWithout(dst, raw, "apiVersion", "kind"); ok {
		return out, nil
	}
	obj, err := cache.DecodeJSON(raw)
	if err != nil {
		return dst, err
	}
	delete(obj, "apiVersion")
	delete(obj, "kind")
	b, err := json.Marshal(obj)
	return append(dst, b...), err
}
