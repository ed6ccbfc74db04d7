package registry

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/opemu/opemu/cache"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
)

// Get returns t's stored object as a client reading it with resourceVersion rv gets it
// (Kubernetes' get semantics): "" the current state (a consistent read: the store first
// catches up with every write made anywhere), "0" what this server holds, N a state at least as
// new as N.
func (s *Store) Get(ctx context.Context, t Target, rv string) (*cache.Object, error) {
	if err := s.fresh(ctx, rv); err != nil {
		return nil, err
	}
	o, err := s.cfg.Storage.Get(ctx, t.Key)
	return o, viewError(t, err)
}

// fresh makes the store's reads at least as new as a read with resourceVersion rv asks: every
// write made anywhere for "", nothing for "0", version N for N. A version the store does not
// reach in time is left to the caller's check (the 504 of a too large version).
func (s *Store) fresh(ctx context.Context, rv string) error {
	switch rv {
	case "0":
		return nil
	case "":
		return s.cfg.Storage.WaitUntilFresh(ctx, 0)
	}
	n, err := cache.ParseResourceVersion(rv)
	if err != nil {
		return nil // lists refuse it when parsing; a get ignores it, as it always has
	}
	if err := s.cfg.Storage.WaitUntilFresh(ctx, n); err != nil && !errors.Is(err, cache.ErrTimeout) {
		return err
	}
	return nil
}

// View returns what a client reading t gets of o: its stored JSON, for /scale its
// autoscaling/v1 Scale, for a kind that is a view of another (kinds.Conversion) the object
// converted into it.
func View(t Target, o *cache.Object) ([]byte, error) {
	if t.Sub != "scale" && t.Kind.Conversion == nil {
		return o.Raw(), nil
	}
	obj, err := o.Decode()
	if err != nil {
		return nil, err
	}
	if t.Sub == "scale" {
		return json.Marshal(scaleOf(t, obj))
	}
	view, err := t.Kind.Conversion.FromStorage(obj)
	if err != nil {
		return nil, err
	}
	return json.Marshal(view)
}

// ListOptions is a parsed list request (SPEC §4.2).
type ListOptions struct {
	// Label and Field select objects; nil means everything. Field names are the listed kind's
	// (a view's are renamed into the stored kind's here).
	Label labels.Selector
	Field fields.Selector
	// Limit is the page size; zero means everything.
	Limit int
	// Continue continues a paged list.
	Continue *Continue
	// ResourceVersion and ResourceVersionMatch are Kubernetes' list semantics: "" is the
	// current state, "0" any state, N with NotOlderThan (the default) at least N, with Exact
	// exactly N.
	ResourceVersion      string
	ResourceVersionMatch string
}

// Continue is the opaque `continue` value: the first page's list version and the last key
// returned.
type Continue struct {
	RV        uint64 `json:"rv"`
	Namespace string `json:"ns,omitempty"`
	Name      string `json:"name"`
}

// Encode returns the token a client sends back.
func (c Continue) Encode() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeContinue parses a `continue` token; a malformed one is a 400.
func DecodeContinue(s string) (*Continue, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, badRequest("continue key is not valid: %v", err)
	}
	var c Continue
	if err := json.Unmarshal(b, &c); err != nil || c.RV == 0 || c.Name == "" {
		return nil, badRequest("continue key is not valid")
	}
	return &c, nil
}

// List returns one page of t's objects (every namespace when t.Key.Namespace is empty) and its
// ListMeta. Pages show the current state after the last key returned, with the first page's
// list version; a continue token older than the history gets 410.
func (s *Store) List(ctx context.Context, t Target, q ListOptions) ([]*cache.Object, metav1.ListMeta, error) {
	st := s.cfg.Storage
	freshAt := q.ResourceVersion
	if q.Continue != nil {
		freshAt = formatRV(q.Continue.RV) // a token from another replica: catch up with its list
	}
	if err := s.fresh(ctx, freshAt); err != nil {
		return nil, metav1.ListMeta{}, err
	}
	current := st.ResourceVersion()
	if q.ResourceVersion != "" && q.ResourceVersion != "0" && q.Continue == nil {
		rv, _ := cache.ParseResourceVersion(q.ResourceVersion)
		switch {
		case rv > current:
			return nil, metav1.ListMeta{}, tooLargeResourceVersion(rv, current)
		case q.ResourceVersionMatch == "Exact" && rv != current:
			return nil, metav1.ListMeta{}, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, current))
		}
	}
	field, err := storageFields(t, q.Field)
	if err != nil {
		return nil, metav1.ListMeta{}, err
	}
	opts := []cache.ListOption{cache.InNamespace(t.Key.Namespace), cache.MatchingLabels(q.Label), cache.MatchingFields(field), cache.Limit(q.Limit)}
	listRV := uint64(0)
	if q.Continue != nil {
		if err := st.CheckResourceVersion(q.Continue.RV, t.Key.GroupResource()); err != nil {
			return nil, metav1.ListMeta{}, apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
		}
		listRV = q.Continue.RV
		opts = append(opts, cache.After(q.Continue.Namespace, q.Continue.Name))
	}
	res, err := st.List(ctx, t.Key.GroupResource(), opts...)
	if err != nil {
		return nil, metav1.ListMeta{}, err
	}
	if listRV == 0 {
		listRV = res.ResourceVersion
	}
	meta := metav1.ListMeta{ResourceVersion: formatRV(listRV)}
	if res.Remaining > 0 && len(res.Items) > 0 {
		last := res.Items[len(res.Items)-1].Key()
		meta.Continue = Continue{RV: listRV, Namespace: last.Namespace, Name: last.Name}.Encode()
		n := int64(res.Remaining)
		meta.RemainingItemCount = &n
	}
	return res.Items, meta, nil
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
