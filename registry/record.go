package registry

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/calls"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The writes of opemu's own components (the Client) go in the record of calls
// (Config.Calls) marked Internal, with the client's field manager as their component and the
// key the component was reconciling (calls.WithReconcile). Their reads are not recorded: the
// controllers read from the store as an informer reads its cache.

// record adds one write of c's to the record: verb on key (sub its subresource), begun at
// start, that produced o or failed with err.
func (c *Client) record(ctx context.Context, verb string, key cache.Key, sub string, start time.Time, o *cache.Object, err error) {
	rec := c.s.cfg.Calls
	if rec == nil {
		return
	}
	call := callPool.Get().(*calls.Call)
	*call = calls.Call{Start: start, Latency: time.Since(start), Verb: verb, APIGroup: key.Group, Resource: key.Resource,
		Subresource: sub, Namespace: key.Namespace, Name: key.Name, FieldManager: c.manager, Internal: true,
		Component: c.manager, Reconcile: calls.ReconcileOf(ctx)}
	if k, ok := c.s.cfg.Kinds.Resource(key.GroupResource()); ok {
		call.APIVersion = k.Version
	}
	call.Code, call.Reason = outcome(verb, err)
	if o != nil {
		call.ResourceVersion = o.ResourceVersion()
	}
	rec.Add(call)
	*call = calls.Call{}
	callPool.Put(call)
}

// callPool recycles the Calls of record: the ring keeps a copy of each.
var callPool = sync.Pool{New: func() any { return new(calls.Call) }}

// outcome is the HTTP status code and Status reason a client would have got for err.
func outcome(verb string, err error) (int32, string) {
	if err == nil {
		if verb == "create" {
			return http.StatusCreated, ""
		}
		return http.StatusOK, ""
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		s := st.Status()
		return s.Code, string(s.Reason)
	}
	for _, e := range []struct {
		err    error
		code   int32
		reason metav1.StatusReason
	}{
		{cache.ErrNotFound, http.StatusNotFound, metav1.StatusReasonNotFound},
		{cache.ErrAlreadyExists, http.StatusConflict, metav1.StatusReasonAlreadyExists},
		{cache.ErrConflict, http.StatusConflict, metav1.StatusReasonConflict},
		{cache.ErrInvalid, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid},
		{cache.ErrForbidden, http.StatusForbidden, metav1.StatusReasonForbidden},
		{cache.ErrGone, http.StatusGone, metav1.StatusReasonExpired},
		{cache.ErrUnavailable, http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable},
		{cache.ErrTimeout, http.StatusGatewayTimeout, metav1.StatusReasonTimeout},
		{cache.ErrTooLarge, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge},
	} {
		if errors.Is(err, e.err) {
			return e.code, string(e.reason)
		}
	}
	return http.StatusInternalServerError, string(metav1.StatusReasonInternalError)
}
