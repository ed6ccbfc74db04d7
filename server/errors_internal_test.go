package server

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/opemu/opemu/cache"
)

// TestStoreErrorStatus: a store error becomes the Status kube-apiserver answers for the same
// failure. A 422's details name the group and the Kind served (apierrors.NewInvalid): the oracle
// (kube-apiserver v1.37.2) answers a Deployment without a name with `Deployment.apps "" is
// invalid: ...` and details `{"group":"apps","kind":"Deployment"}`. A 404's and a 409's name the
// resource (apierrors.NewNotFound, NewConflict; the oracle's 409 for a uid precondition says
// `"kind":"configmaps"`).
func TestStoreErrorStatus(t *testing.T) {
	t.Parallel()
	s, _ := newFuzzServer(t)
	deployment := cache.Key{Group: "apps", Resource: "deployments", Namespace: "default", Name: "web"}
	application := cache.Key{Group: "cloudnative.elide.dev", Resource: "applications", Namespace: "default", Name: "web"}
	gone := cache.Key{Group: "example.com", Resource: "gadgets", Namespace: "default", Name: "web"}
	forbidden := func(msg string) []metav1.StatusCause {
		return []metav1.StatusCause{{Type: metav1.CauseType(field.ErrorTypeForbidden), Message: "Forbidden: " + msg, Field: "metadata.name"}}
	}
	for _, tc := range []struct {
		name    string
		err     *cache.Error
		code    int32
		reason  metav1.StatusReason
		message string
		details *metav1.StatusDetails
	}{
		{
			name: "422 of a built-in kind", err: &cache.Error{Err: cache.ErrInvalid, Key: deployment, Field: "metadata.name", Message: "bad"},
			code: http.StatusUnprocessableEntity, reason: metav1.StatusReasonInvalid,
			message: `Deployment.apps "web" is invalid: metadata.name: Forbidden: bad`,
			details: &metav1.StatusDetails{Name: "web", Group: "apps", Kind: "Deployment", Causes: forbidden("bad")},
		},
		{
			name: "422 of a custom kind", err: &cache.Error{Err: cache.ErrInvalid, Key: application, Field: "metadata.name", Message: "bad"},
			code: http.StatusUnprocessableEntity, reason: metav1.StatusReasonInvalid,
			message: `Application.cloudnative.elide.dev "web" is invalid: metadata.name: Forbidden: bad`,
			details: &metav1.StatusDetails{Name: "web", Group: "cloudnative.elide.dev", Kind: "Application", Causes: forbidden("bad")},
		},
		{
			name: "422 of a resource no longer served", err: &cache.Error{Err: cache.ErrInvalid, Key: gone, Field: "metadata.name", Message: "bad"},
			code: http.StatusUnprocessableEntity, reason: metav1.StatusReasonInvalid,
			message: `gadgets.example.com "web" is invalid: metadata.name: Forbidden: bad`,
			details: &metav1.StatusDetails{Name: "web", Group: "example.com", Kind: "gadgets", Causes: forbidden("bad")},
		},
		{
			name: "404", err: &cache.Error{Err: cache.ErrNotFound, Key: deployment},
			code: http.StatusNotFound, reason: metav1.StatusReasonNotFound,
			message: `deployments.apps "web" not found`,
			details: &metav1.StatusDetails{Name: "web", Group: "apps", Kind: "deployments"},
		},
		{
			name: "409", err: &cache.Error{Err: cache.ErrConflict, Key: deployment, Message: "the object has been modified"},
			code: http.StatusConflict, reason: metav1.StatusReasonConflict,
			message: `Operation cannot be fulfilled on deployments.apps "web": the object has been modified`,
			details: &metav1.StatusDetails{Name: "web", Group: "apps", Kind: "deployments"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			st := s.toStatus(tc.err)
			assert.Equal(t, &metav1.Status{
				TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
				Status:   metav1.StatusFailure, Code: tc.code, Reason: tc.reason, Message: tc.message, Details: tc.details,
			}, st)
		})
	}
}

// TestContextErrorStatus: work cut short by its request's context (the deadline passed, or the
// client left) is kube-apiserver's 504 Timeout with the context's error, not a bare 500.
func TestContextErrorStatus(t *testing.T) {
	t.Parallel()
	s, _ := newFuzzServer(t)
	for _, err := range []error{context.DeadlineExceeded, fmt.Errorf("deleting: %w", context.Canceled)} {
		st := s.toStatus(err)
		assert.Equal(t, int32(http.StatusGatewayTimeout), st.Code)
		assert.Equal(t, metav1.StatusReasonTimeout, st.Reason)
		assert.Equal(t, "Timeout: request did not complete within requested timeout - "+err.Error(), st.Message)
	}
}
