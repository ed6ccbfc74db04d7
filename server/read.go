package server

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// listQuery is a parsed list request (SPEC §4.2).
type listQuery struct {
	label   labels.Selector
	field   fields.Selector
	limit   int
	cont    *continueToken
	rv      string
	rvMatch string
}

// continueToken is the opaque `continue` value: the first page's list version and the last key
// returned.
type continueToken struct {
	RV        uint64 `json:"rv"`
	Namespace string `json:"ns,omitempty"`
	Name      string `json:"name"`
}

func (c continueToken) encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func decodeContinue(s string) (*continueToken, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, badRequest("continue key is not valid: %v", err)
	}
	var c continueToken
	if err := json.Unmarshal(b, &c); err != nil || c.RV == 0 || c.Name == "" {
		return nil, badRequest("continue key is not valid")
	}
	return &c, nil
}

// parseListQuery parses a list or watch query; selectable says which fields a field selector
// may name (nil: any).
func parseListQuery(q map[string][]string, selectable func(label string) bool) (listQuery, error) {
	get := func(k string) string {
		if v := q[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	var lq listQuery
	var err error
	if lq.label, err = labels.Parse(get("labelSelector")); err != nil {
		return lq, badRequest("unable to parse requirement: %v", err)
	}
	if lq.field, err = fields.ParseSelector(get("fieldSelector")); err != nil {
		return lq, badRequest("invalid field selector: %v", err)
	}
	for _, r := range lq.field.Requirements() {
		if selectable != nil && !selectable(r.Field) {
			return lq, badRequest("field label not supported: %s", r.Field)
		}
	}
	if l := get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 0 {
			return lq, badRequest("limit must be a non-negative integer, not %q", l)
		}
		lq.limit = n
	}
	if c := get("continue"); c != "" {
		if lq.cont, err = decodeContinue(c); err != nil {
			return lq, err
		}
	}
	lq.rv, lq.rvMatch = get("resourceVersion"), get("resourceVersionMatch")
	if lq.rv != "" {
		if _, err := cache.ParseResourceVersion(lq.rv); err != nil {
			return lq, badRequest("resourceVersion %q is not a valid resource version", lq.rv)
		}
	}
	switch lq.rvMatch {
	case "", "NotOlderThan", "Exact":
	default:
		return lq, badRequest("resourceVersionMatch must be NotOlderThan or Exact, not %q", lq.rvMatch)
	}
	watchList := get("sendInitialEvents") != ""
	if lq.rvMatch != "" && (lq.rv == "" && !watchList || lq.cont != nil) {
		return lq, apierrors.NewBadRequest("resourceVersionMatch is forbidden unless resourceVersion is provided and continue is not")
	}
	return lq, nil
}

// list returns one page of t's objects (every namespace when t.key.Namespace is empty) and its
// ListMeta.
func (s *Server) list(ctx context.Context, t target, q listQuery) ([]*cache.Object, metav1.ListMeta, error) {
	st := s.cfg.Store
	current := st.ResourceVersion()
	if q.rv != "" && q.rv != "0" && q.cont == nil {
		rv, _ := cache.ParseResourceVersion(q.rv)
		switch {
		case rv > current:
			return nil, metav1.ListMeta{}, tooLargeResourceVersion(rv, current)
		case q.rvMatch == "Exact" && rv != current:
			return nil, metav1.ListMeta{}, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, current))
		}
	}
	opts := []cache.ListOption{cache.InNamespace(t.key.Namespace), cache.MatchingLabels(q.label), cache.MatchingFields(q.field), cache.Limit(q.limit)}
	listRV := uint64(0)
	if q.cont != nil {
		if err := st.CheckResourceVersion(q.cont.RV, t.key.GroupResource()); err != nil {
			return nil, metav1.ListMeta{}, apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
		}
		listRV = q.cont.RV
		opts = append(opts, cache.After(q.cont.Namespace, q.cont.Name))
	}
	res, err := st.List(ctx, t.key.GroupResource(), opts...)
	if err != nil {
		return nil, metav1.ListMeta{}, err
	}
	if listRV == 0 {
		listRV = res.ResourceVersion
	}
	meta := metav1.ListMeta{ResourceVersion: formatRV(listRV)}
	if res.Remaining > 0 && len(res.Items) > 0 {
		last := res.Items[len(res.Items)-1].Key()
		meta.Continue = continueToken{RV: listRV, Namespace: last.Namespace, Name: last.Name}.encode()
		n := int64(res.Remaining)
		meta.RemainingItemCount = &n
	}
	return res.Items, meta, nil
}

// answerList streams a <Kind>List around the stored objects' shared bytes, without
// re-encoding them or gathering the whole answer in memory first.
func answerList(c *echo.Context, apiVersion, kind string, meta metav1.ListMeta, items []*cache.Object) error {
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
		bw.Write(o.Raw())
	}
	bw.WriteString(`],"kind":`)
	bw.Write(k)
	bw.WriteString(`,"metadata":`)
	bw.Write(m)
	bw.WriteByte('}')
	// A failure here is the client going away: the status line is already sent.
	return bw.Flush()
}

// tooLargeResourceVersion is the 504 the kube-apiserver answers for a version it has not
// reached yet.
func tooLargeResourceVersion(rv, current uint64) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusGatewayTimeout,
		Reason:  metav1.StatusReasonTimeout,
		Message: fmt.Sprintf("Too large resource version: %d, current: %d", rv, current),
		Details: &metav1.StatusDetails{
			Causes:            []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}},
			RetryAfterSeconds: 1,
		},
	}}
}

// get returns the encoded object at t (or its Scale view).
func (s *Server) get(ctx context.Context, t target) ([]byte, error) {
	o, err := s.cfg.Store.Get(ctx, t.key)
	if err != nil {
		return nil, err
	}
	if t.sub != "scale" {
		return o.Raw(), nil
	}
	obj, err := o.Decode()
	if err != nil {
		return nil, err
	}
	return json.Marshal(scaleOf(t, obj))
}

// selectable says which fields a field selector on t's resource may name.
func (s *Server) selectable(t target) func(string) bool {
	return t.kind.Selectable
}
