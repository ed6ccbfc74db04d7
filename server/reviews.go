package server

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The reviews clients ask before acting (SelfSubjectAccessReview for `kubectl auth can-i`,
// SelfSubjectRulesReview for `auth can-i --list`, SelfSubjectReview for `auth whoami`; k9s and
// dashboards ask them before showing anything). They are created and answered, never stored.
// opemu enforces no authorization: every review allows everything, and says why.

// reviewKinds are the review resources: create-only, cluster-scoped, never stored, so not in
// the kinds registry; discovery lists them beside it.
var reviewKinds = []*kinds.Kind{
	{Group: "authorization.k8s.io", Version: "v1", Kind: "SelfSubjectAccessReview", Plural: "selfsubjectaccessreviews", StorageVersion: "v1", Protobuf: true},
	{Group: "authorization.k8s.io", Version: "v1", Kind: "SelfSubjectRulesReview", Plural: "selfsubjectrulesreviews", StorageVersion: "v1", Protobuf: true},
	{Group: "authentication.k8s.io", Version: "v1", Kind: "SelfSubjectReview", Plural: "selfsubjectreviews", StorageVersion: "v1", Protobuf: true},
}

// allowedReason is the reason every access review gives.
const allowedReason = "opemu does not enforce authorization: every request is allowed"

// reviewUser is the request's user as a review reports it: the one the request guard
// authenticated (a bearer token's user), or Anonymous when the server authenticates nobody.
func reviewUser(ctx context.Context) authenticationv1.UserInfo {
	u, ok := UserFrom(ctx)
	if !ok {
		u = Anonymous
	}
	return authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}
}

// selfSubjectAccessReview serves POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews.
func (s *Server) selfSubjectAccessReview(c *echo.Context) error {
	var r authorizationv1.SelfSubjectAccessReview
	if err := s.decodeReview(c, reviewKinds[0], &r); err != nil {
		return err
	}
	st, err := accessReview(r.Spec)
	if err != nil {
		return err
	}
	r.Status = st
	return c.JSON(http.StatusCreated, &r)
}

// selfSubjectRulesReview serves POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews.
func (s *Server) selfSubjectRulesReview(c *echo.Context) error {
	var r authorizationv1.SelfSubjectRulesReview
	if err := s.decodeReview(c, reviewKinds[1], &r); err != nil {
		return err
	}
	r.Status = rulesReview()
	return c.JSON(http.StatusCreated, &r)
}

// selfSubjectReview serves POST /apis/authentication.k8s.io/v1/selfsubjectreviews.
func (s *Server) selfSubjectReview(c *echo.Context) error {
	var r authenticationv1.SelfSubjectReview
	if err := s.decodeReview(c, reviewKinds[2], &r); err != nil {
		return err
	}
	r.Status.UserInfo = reviewUser(c.Request().Context())
	return c.JSON(http.StatusCreated, &r)
}

// accessReview answers an access review: allowed, once the spec names exactly one of resource
// or non-resource attributes (kube-apiserver's validation, 422 otherwise).
func accessReview(spec authorizationv1.SelfSubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	if (spec.ResourceAttributes == nil) == (spec.NonResourceAttributes == nil) {
		return authorizationv1.SubjectAccessReviewStatus{}, apierrors.NewInvalid(
			schema.GroupKind{Group: "authorization.k8s.io", Kind: "SelfSubjectAccessReview"}, "",
			field.ErrorList{field.Invalid(field.NewPath("spec", "resourceAttributes"), spec.NonResourceAttributes,
				"exactly one of nonResourceAttributes or resourceAttributes must be specified")})
	}
	return authorizationv1.SubjectAccessReviewStatus{Allowed: true, Reason: allowedReason}, nil
}

// rulesReview is what the user may do anywhere: everything.
func rulesReview() authorizationv1.SubjectRulesReviewStatus {
	return authorizationv1.SubjectRulesReviewStatus{
		ResourceRules:    []authorizationv1.ResourceRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}}},
		NonResourceRules: []authorizationv1.NonResourceRule{{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}}},
	}
}

// decodeReview reads a review body (JSON, YAML or protobuf) into into, with k's apiVersion and
// kind when the body leaves them out, as for any built-in kind.
func (s *Server) decodeReview(c *echo.Context, k *kinds.Kind, into any) error {
	if _, err := parseWriteOptions(c, createOpts); err != nil {
		return err
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	obj, _, err := s.decodeObject(registry.Target{Kind: k}, mediaType(c.Request()), body, "Ignore")
	if err != nil {
		return err
	}
	if av, kind := obj["apiVersion"], obj["kind"]; av != k.GroupVersion() || kind != k.Kind {
		return badRequest("the body is a %v %v, not a %s %s", av, kind, k.GroupVersion(), k.Kind)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, into); err != nil {
		return badRequest("the body is not a %s: %v", k.Kind, err)
	}
	return nil
}

// methodNotAllowed answers a verb a resource does not take (GET on a review).
func methodNotAllowed(*echo.Context) error { return echo.ErrMethodNotAllowed }

// reviewResources are the APIResources discovery lists for group/version.
func reviewResources(group, version string) []metav1.APIResource {
	var out []metav1.APIResource
	for _, k := range reviewKinds {
		if k.Group == group && k.Version == version {
			out = append(out, metav1.APIResource{Name: k.Plural, Kind: k.Kind, Verbs: metav1.Verbs{"create"}})
		}
	}
	return out
}
