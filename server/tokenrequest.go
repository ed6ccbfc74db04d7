package server

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/kinds"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The TokenRequest subresource (POST .../serviceaccounts/<name>/token, `kubectl create
// token`): a ServiceAccount token (satoken.go) for the named ServiceAccount.

var tokenRequestKind = &kinds.Kind{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenRequest", Plural: "serviceaccounts", StorageVersion: "v1", Protobuf: true}

// Bounds of a TokenRequest's expirationSeconds, as kube-apiserver's.
const (
	minTokenTTL     = 10 * time.Minute
	defaultTokenTTL = time.Hour
)

func (s *Server) tokenRequest(c *echo.Context) error {
	t, err := s.parseTarget(c)
	if err != nil {
		return err
	}
	var r authenticationv1.TokenRequest
	if err := s.decodeReview(c, tokenRequestKind, &r); err != nil {
		return err
	}
	if r.Spec.ExpirationSeconds == nil {
		def := int64(defaultTokenTTL / time.Second) // authentication/v1's default
		r.Spec.ExpirationSeconds = &def
	}
	managed := s.trackReview(c, tokenRequestKind, "token", &r)
	ttl := time.Duration(*r.Spec.ExpirationSeconds) * time.Second
	if ttl < minTokenTTL {
		// Named "" as kube-apiserver names it (the request's body has no name).
		return apierrors.NewInvalid(schema.GroupKind{Group: "authentication.k8s.io", Kind: "TokenRequest"}, "",
			field.ErrorList{field.Invalid(field.NewPath("spec", "expirationSeconds"), int64(ttl/time.Second), "may not specify a duration less than 10 minutes")})
	}
	if len(r.Spec.Audiences) == 0 {
		r.Spec.Audiences = []string{ServiceAccountIssuer}
	}
	sa, err := s.cfg.Registry.Get(c.Request().Context(), t, "")
	if err != nil {
		return err
	}
	now := s.cfg.Clock.Now()
	token, exp, err := s.issueToken(t.Key.Namespace, t.Key.Name, sa.UID(), r.Spec.Audiences, now, ttl)
	if err != nil {
		return err
	}
	secs := int64(ttl / time.Second)
	r.Spec.ExpirationSeconds = &secs
	r.ObjectMeta = metav1.ObjectMeta{Name: t.Key.Name, Namespace: t.Key.Namespace, UID: types.UID(sa.UID()), CreationTimestamp: metav1.NewTime(now), ManagedFields: managed}
	r.Status = authenticationv1.TokenRequestStatus{Token: token, ExpirationTimestamp: metav1.NewTime(exp)}
	return c.JSON(http.StatusCreated, &r)
}
