package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"

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
	{Group: "authorization.k8s.io", Version: "v1", Kind: "SelfSubjectAccessReview", Plural: "selfsubjectaccessreviews", Singular: "selfsubjectaccessreview", StorageVersion: "v1", Protobuf: true},
	{Group: "authorization.k8s.io", Version: "v1", Kind: "SelfSubjectRulesReview", Plural: "selfsubjectrulesreviews", Singular: "selfsubjectrulesreview", StorageVersion: "v1", Protobuf: true},
	{Group: "authentication.k8s.io", Version: "v1", Kind: "SelfSubjectReview", Plural: "selfsubjectreviews", Singular: "selfsubjectreview", StorageVersion: "v1", Protobuf: true},
}

// isReview reports whether k is one of reviewKinds.
func isReview(k *kinds.Kind) bool { return slices.Contains(reviewKinds, k) }

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
	if r.Spec.Namespace == "" {
		return badRequest("no namespace on request")
	}
	// As kube-apiserver: the answer is a new review, its status only.
	return c.JSON(http.StatusCreated, &authorizationv1.SelfSubjectRulesReview{TypeMeta: r.TypeMeta, Status: rulesReview()})
}

// selfSubjectReview serves POST /apis/authentication.k8s.io/v1/selfsubjectreviews.
func (s *Server) selfSubjectReview(c *echo.Context) error {
	var r authenticationv1.SelfSubjectReview
	if err := s.decodeReview(c, reviewKinds[2], &r); err != nil {
		return err
	}
	// As kube-apiserver: the answer is a new review, made now.
	return c.JSON(http.StatusCreated, &authenticationv1.SelfSubjectReview{TypeMeta: r.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(s.cfg.Clock.Now())},
		Status:     authenticationv1.SelfSubjectReviewStatus{UserInfo: reviewUser(c.Request().Context())}})
}

// accessReview answers an access review: allowed, once the spec names exactly one of resource
// or non-resource attributes (kube-apiserver's validation, 422 otherwise: its Status names no
// kind, as kube-apiserver's, which takes it from the decoded review's emptied TypeMeta).
func accessReview(spec authorizationv1.SelfSubjectAccessReviewSpec) (authorizationv1.SubjectAccessReviewStatus, error) {
	if (spec.ResourceAttributes == nil) == (spec.NonResourceAttributes == nil) {
		// The value as kube-apiserver quotes it: its internal type, which has no JSON names.
		var value any
		if a := spec.NonResourceAttributes; a != nil {
			value = struct{ Path, Verb string }{a.Path, a.Verb}
		}
		return authorizationv1.SubjectAccessReviewStatus{}, apierrors.NewInvalid(
			schema.GroupKind{Group: "authorization.k8s.io"}, "",
			field.ErrorList{field.Invalid(field.NewPath("spec"), value,
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
	o, err := parseWriteOptions(c, createOpts)
	if err != nil {
		return err
	}
	body, err := readBody(c)
	if err == nil {
		err = s.checkYAMLBody(c.Request(), body)
	}
	if err != nil {
		return err
	}
	o.FieldValidation = "Ignore"
	obj, _, err := s.decodeObject(registry.Target{Kind: k}, mediaType(c.Request()), body, &o)
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
