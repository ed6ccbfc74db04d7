package registry

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
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
// converted into it. A custom resource its CRD's converter cannot convert (a conversion
// webhook that fails) is kube-apiserver's 500 of an object its storage cannot decode.
func View(t Target, o *cache.Object) ([]byte, error) {
	raw, err := view(t, o)
	var u unconvertible
	if errors.As(err, &u) {
		_, se := u.storageError(o, "")
		return nil, apierrors.NewInternalError(se)
	}
	return raw, err
}

// ListView is View for an item of a list: an object that cannot be converted fails the list
// as kube-apiserver's storage fails it (a 500 StorageReadError naming the object's key).
func ListView(t Target, o *cache.Object) ([]byte, error) {
	raw, err := view(t, o)
	var u unconvertible
	if !errors.As(err, &u) {
		return raw, err
	}
	key, se := u.storageError(o, "/registry")
	gr := schema.GroupResource{Group: t.Kind.Group, Resource: t.Kind.Plural}
	return nil, &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonStoreReadError,
		Message: fmt.Sprintf("failed to read one or more %s from the storage: %v", gr.String(), se),
		Details: &metav1.StatusDetails{Group: gr.Group, Kind: gr.Resource, Name: "list", Causes: []metav1.StatusCause{
			{Type: metav1.CauseTypeUnexpectedServerResponse, Field: key, Message: se.Error()},
		}},
	}}
}

// apiVersionPrefix is how the JSON of an object of k's version starts.
func apiVersionPrefix(k *kinds.Kind) []byte {
	return []byte(`{"apiVersion":"` + k.GroupVersion() + `"`)
}

// unconvertible is the error of a CRD's converter reading a stored object.
type unconvertible struct{ err error }

func (u unconvertible) Error() string { return u.err.Error() }

// storageError is the error kube-apiserver's storage (k8s.io/apiserver/pkg/storage's
// StorageError of a corrupt object) gives for o, which it cannot decode, and o's key there
// (prefix, then /group/resource/namespace/name).
func (u unconvertible) storageError(o *cache.Object, prefix string) (string, error) {
	k := o.Key()
	key := prefix + "/" + k.Group + "/" + k.Resource
	if k.Namespace != "" {
		key += "/" + k.Namespace
	}
	key += "/" + k.Name
	return key, fmt.Errorf("StorageError: corrupt object, Code: 7, Key: %s, ResourceVersion: 0, AdditionalErrorMsg: object not decodable revision=%d: %w",
		key, o.ResourceVersion(), u.err)
}

func view(t Target, o *cache.Object) ([]byte, error) {
	convert := t.Kind.Upgrade
	switch {
	case t.Sub == "scale":
	case t.Kind.Conversion != nil:
		convert = t.Kind.Conversion.FromStorage
	case convert == nil || bytes.HasPrefix(o.Raw(), apiVersionPrefix(t.Kind)):
		// Objects encoded from maps start with apiVersion (encoding/json sorts the keys).
		return o.Raw(), nil
	}
	obj, err := o.Decode()
	if err != nil {
		return nil, err
	}
	if t.Sub == "scale" {
		return json.Marshal(scaleOf(t, obj))
	}
	if t.Kind.Conversion == nil && obj["apiVersion"] == t.Kind.GroupVersion() {
		return o.Raw(), nil
	}
	v, err := convert(obj)
	if err != nil {
		if t.Kind.BuiltIn() {
			return nil, err
		}
		return nil, unconvertible{err}
	}
	return json.Marshal(v)
}

// ListOptions is a parsed list request (SPEC §4.2).
type ListOptions struct {
	// Label and Field select objects; nil means everything. Field names are the listed kind's
	// (a view's are renamed into the stored kind's here).
	Label labels.Selector
	Field fields.Selector
	// Limit is the page size; zero means everything.
	Limit int
	// Continue is the `continue` token of the previous page ("": the first page).
	Continue string
	// ResourceVersion and ResourceVersionMatch are Kubernetes' list semantics: "" is the
	// current state, "0" any state, N with NotOlderThan (the default) at least N, with Exact
	// exactly N (rebuilt from the watch history while it reaches back that far).
	ResourceVersion      string
	ResourceVersionMatch string
}

// continueToken is the `continue` value, shaped as kube-apiserver's (so a malformed one is
// refused with its words): the first page's list version and the key the next page starts
// after, relative to the list's scope ("<name>\x00" in a namespace or for a cluster-scoped
// kind, "<namespace>/<name>\x00" across namespaces).
type continueToken struct {
	APIVersion      string `json:"v"`
	ResourceVersion int64  `json:"rv"`
	StartKey        string `json:"start"`
}

// continueAfter is a decoded continue token: the version every page of the list shows and the
// last key returned.
type continueAfter struct {
	rv              uint64
	namespace, name string
}

// encodeContinue returns the token of the page after (namespace, name) of t's list at rv.
func encodeContinue(t Target, rv uint64, namespace, name string) string {
	start := name + "\x00"
	if t.Key.Namespace == "" && namespace != "" {
		start = namespace + "/" + start
	}
	b, _ := json.Marshal(continueToken{APIVersion: "meta.k8s.io/v1", ResourceVersion: int64(rv), StartKey: start})
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeContinue parses a `continue` token of t's list; a malformed one is a 400 worded as
// kube-apiserver words it.
func decodeContinue(t Target, token string) (continueAfter, error) {
	invalid := func(format string, args ...any) error {
		return badRequest("invalid continue token: "+format, args...)
	}
	data, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return continueAfter{}, invalid("continue key is not valid: %v", err)
	}
	var c continueToken
	if err := json.Unmarshal(data, &c); err != nil {
		return continueAfter{}, invalid("continue key is not valid: %v", err)
	}
	switch {
	case c.APIVersion != "meta.k8s.io/v1":
		return continueAfter{}, invalid("continue key is not valid: server does not recognize this encoded version %v", c.APIVersion)
	case c.ResourceVersion <= 0:
		return continueAfter{}, invalid("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
	case c.StartKey == "":
		return continueAfter{}, invalid("continue key is not valid: encoded start key empty (version meta.k8s.io/v1)")
	}
	key := "/" + strings.TrimPrefix(c.StartKey, "/")
	if path.Clean(key) != key {
		return continueAfter{}, invalid("continue key is not valid: %v", c.StartKey)
	}
	// The next page starts at the token's key: one ending in NUL (as the server makes them)
	// starts right after the key before it.
	key = strings.TrimSuffix(key[1:], "\x00")
	after := continueAfter{rv: uint64(c.ResourceVersion), namespace: t.Key.Namespace, name: key}
	if t.Key.Namespace == "" && t.Kind.Namespaced {
		after.namespace, after.name, _ = strings.Cut(key, "/")
	}
	return after, nil
}

// List returns one page of t's objects (every namespace when t.Key.Namespace is empty) and its
// ListMeta. Every page shows the objects as they were at the first page's list version (the
// watch history rebuilds them); a continue token older than that history gets 410.
func (s *Store) List(ctx context.Context, t Target, q ListOptions) ([]*cache.Object, metav1.ListMeta, error) {
	st := s.cfg.Storage
	var cont continueAfter
	if q.Continue != "" {
		var err error
		if cont, err = decodeContinue(t, q.Continue); err != nil {
			return nil, metav1.ListMeta{}, err
		}
	}
	freshAt := q.ResourceVersion
	if cont.rv != 0 {
		freshAt = formatRV(cont.rv) // a token from another replica: catch up with its list
	}
	if err := s.fresh(ctx, freshAt); err != nil {
		return nil, metav1.ListMeta{}, err
	}
	field, err := storageFields(t, q.Field)
	if err != nil {
		return nil, metav1.ListMeta{}, err
	}
	opts := []cache.ListOption{cache.InNamespace(t.Key.Namespace), cache.MatchingLabels(q.Label), cache.MatchingFields(field), cache.Limit(q.Limit)}
	current := st.ResourceVersion()
	switch {
	case cont.rv != 0:
		opts = append(opts, cache.AtVersion(cont.rv), cache.After(cont.namespace, cont.name))
	case q.ResourceVersion != "" && q.ResourceVersion != "0":
		rv, _ := cache.ParseResourceVersion(q.ResourceVersion)
		if rv > current {
			return nil, metav1.ListMeta{}, tooLargeResourceVersion(rv, current)
		}
		if q.ResourceVersionMatch == string(metav1.ResourceVersionMatchExact) {
			opts = append(opts, cache.AtVersion(rv))
		}
	}
	res, err := st.List(ctx, t.Key.GroupResource(), opts...)
	if errors.Is(err, cache.ErrGone) && cont.rv != 0 {
		return nil, metav1.ListMeta{}, apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter.")
	}
	if err != nil {
		return nil, metav1.ListMeta{}, err
	}
	meta := metav1.ListMeta{ResourceVersion: formatRV(res.ResourceVersion)}
	if res.Remaining > 0 && len(res.Items) > 0 {
		last := res.Items[len(res.Items)-1].Key()
		meta.Continue = encodeContinue(t, res.ResourceVersion, last.Namespace, last.Name)
		// Only an unfiltered list knows how many remain (kube-apiserver leaves it out too).
		if (q.Label == nil || q.Label.Empty()) && (q.Field == nil || q.Field.Empty()) {
			n := int64(res.Remaining)
			meta.RemainingItemCount = &n
		}
	}
	return res.Items, meta, nil
}

// tooLargeResourceVersion is the 504 the kube-apiserver answers for a version it has not
// reached yet.
func tooLargeResourceVersion(rv, current uint64) error {
	err := apierrors.NewTimeoutError(fmt.Sprintf("Too large resource version: %d, current: %d", rv, current), 1)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}
	return err
}
