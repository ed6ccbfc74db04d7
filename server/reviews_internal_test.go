package server

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
)

// TestSelfSubjectReviewNamesTheRequestUser: the user authentication puts in the request's
// context (WithUser, as the request guard does for a bearer token) is the one a
// SelfSubjectReview reports.
func TestSelfSubjectReviewNamesTheRequestUser(t *testing.T) {
	t.Parallel()
	s, _ := newFuzzServer(t)
	alice := User{Name: "alice", UID: "1", Groups: []string{"devs", "system:authenticated"}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Handler().ServeHTTP(w, r.WithContext(WithUser(r.Context(), alice)))
	})
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/apis/authentication.k8s.io/v1/selfsubjectreviews", strings.NewReader(`{}`))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	require.Equal(t, http.StatusCreated, rec.Code, rec.Body.String())
	var got authenticationv1.SelfSubjectReview
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &got))
	assert.Equal(t, authenticationv1.UserInfo{Username: "alice", UID: "1", Groups: []string{"devs", "system:authenticated"}}, got.Status.UserInfo)
}
