package server

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// parseListQuery parses a list or watch query; selectable says which fields a field selector
// may name (nil: any).
func parseListQuery(q map[string][]string, selectable func(label string) bool) (registry.ListOptions, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	var lq registry.ListOptions
	if err := checkSelectorSizes(q); err != nil {
		return lq, err
	}
	var err error
	if lq.Label, err = labels.Parse(get("labelSelector")); err != nil {
		return lq, badRequest("unable to parse requirement: %v", err)
	}
	if lq.Field, err = fields.ParseSelector(get("fieldSelector")); err != nil {
		return lq, badRequest("invalid field selector: %v", err)
	}
	for _, r := range lq.Field.Requirements() {
		if selectable != nil && !selectable(r.Field) {
			return lq, badRequest("field label not supported: %s", r.Field)
		}
	}

	if l := get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return lq, badRequest("limit must be a non-negative integer, not %q", l)
		}
		lq.Limit = n
	}
	if c := get("continue"); c != "" {
		if lq.Continue, err = registry.DecodeContinue(c); err != nil {
			return lq, err
		}
	}
	lq.ResourceVersion, lq.ResourceVersionMatch = get("resourceVersion"), get("resourceVersionMatch")
	if lq.ResourceVersion != "" {
		if _, err := cache.ParseResourceVersion(lq.ResourceVersion); err != nil {
			return lq, badRequest("resourceVersion %q is not a valid resource version", lq.ResourceVersion)
		}
	}
	switch lq.ResourceVersionMatch {
	case "", "NotOlderThan", "Exact":
	default:
		return lq, badRequest("resourceVersionMatch must be NotOlderThan or Exact, not %q", lq.ResourceVersionMatch)
	}
	watchList := get("sendInitialEvents") != ""
	if lq.ResourceVersionMatch != "" && (lq.ResourceVersion == "" && !watchList || lq.Continue != nil) {
		return lq, apierrors.NewBadRequest("resourceVersionMatch is forbidden unless resourceVersion is provided and continue is not")
	}
	return lq, nil
}

// answerList streams a <Kind>List of t's kind around the stored objects' shared bytes, without
// re-encoding them or gathering the whole answer in memory first (a view's objects are
// converted one by one).
func answerList(c *echo.Context, t registry.Target, meta metav1.ListMeta, items []*cache.Object) error {
	apiVersion, kind := t.Kind.GroupVersion(), t.Kind.ListKind
	m, err := json.Marshal(meta)
	if err != nil {
		return err
	}
	av, _ := json.Marshal(apiVersion)
	k, _ := json.Marshal(kind)
	w := c.Response()
	w.Header().Set(echo.HeaderContentType, "application/json")
	w.WriteHeader(http.StatusOK)
	bw := bufio.NewWriterSize(w, 32<<10)
	bw.WriteString(`{"apiVersion":`)
	bw.Write(av)
	bw.WriteString(`,"items":[`)
	for i, o := range items {
		if i > 0 {
			bw.WriteByte(',')
		}
		raw := o.Raw()
		if t.Kind.Conversion != nil {
			if raw, err = registry.View(t, o); err != nil {
				return err
			}
		}
		bw.Write(raw)
	}
	bw.WriteString(`],"kind":`)
	bw.Write(k)
	bw.WriteString(`,"metadata":`)
	bw.Write(m)
	bw.WriteByte('}')
	// A failure here is the client going away: the status line is already sent.
	return bw.Flush()
}

// listQuery parses t's list query (a view's field names are the registry's to rename).
func listQuery(q map[string][]string, t registry.Target) (registry.ListOptions, error) {
	return parseListQuery(q, t.Kind.Selectable)
}
