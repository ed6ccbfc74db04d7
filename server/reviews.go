package server

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"slices"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// The reviews clients ask before acting (SelfSubjectAccessReview for `kubectl auth can-i`,
// SelfSubjectRulesReview for `auth can-i --list`, SelfSubjectReview for `auth whoami`; k9s and
// dashboards ask them before showing anything), the ones a server or a webhook asks about
// another user (SubjectAccessReview, LocalSubjectAccessReview) or a token (TokenReview). They
// are created and answered, never stored, by the authorizer in force (authz.go): with
// AUTHORIZATION_MODE=AlwaysAllow every access review allows everything, and says why.

// reviewKinds are the review resources: create-only, never stored, so not in the kinds
// registry; discovery lists them beside it. Only LocalSubjectAccessReview is namespaced.
var reviewKinds = []*kinds.Kind{
	{Group: "authorization.k8s.io", Version: "v1", Kind: "SelfSubjectAccessReview", Plural: "selfsubjectaccessreviews", Singular: "selfsubjectaccessreview", StorageVersion: "v1", Protobuf: true},
	{Group: "authorization.k8s.io", Version: "v1", Kind: "SelfSubjectRulesReview", Plural: "selfsubjectrulesreviews", Singular: "selfsubjectrulesreview", StorageVersion: "v1", Protobuf: true},
	{Group: "authentication.k8s.io", Version: "v1", Kind: "SelfSubjectReview", Plural: "selfsubjectreviews", Singular: "selfsubjectreview", StorageVersion: "v1", Protobuf: true},
	{Group: "authorization.k8s.io", Version: "v1", Kind: "SubjectAccessReview", Plural: "subjectaccessreviews", Singular: "subjectaccessreview", StorageVersion: "v1", Protobuf: true},
	{Group: "authorization.k8s.io", Version: "v1", Kind: "LocalSubjectAccessReview", Plural: "localsubjectaccessreviews", Singular: "localsubjectaccessreview", StorageVersion: "v1", Protobuf: true, Namespaced: true},
	{Group: "authentication.k8s.io", Version: "v1", Kind: "TokenReview", Plural: "tokenreviews", Singular: "tokenreview", StorageVersion: "v1", Protobuf: true},
}

// isReview reports whether k is one of reviewKinds.
func isReview(k *kinds.Kind) bool { return slices.Contains(reviewKinds, k) }

// allowedReason is the reason every access review gives with AUTHORIZATION_MODE=AlwaysAllow.
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
	r.ManagedFields = s.trackReview(c, reviewKinds[0], "", &r)
	ctx := c.Request().Context()
	u := reviewUser(ctx)
	st, err := s.accessReview(ctx, &user.DefaultInfo{Name: u.Username, UID: u.UID, Groups: u.Groups}, r.Spec.ResourceAttributes, r.Spec.NonResourceAttributes)
	if err != nil {
		return err
	}
	r.Status = st
	return c.JSON(http.StatusCreated, &r)
}

// subjectAccessReview serves POST /apis/authorization.k8s.io/v1/subjectaccessreviews.
func (s *Server) subjectAccessReview(c *echo.Context) error {
	var r authorizationv1.SubjectAccessReview
	if err := s.decodeReview(c, reviewKinds[3], &r); err != nil {
		return err
	}
	r.ManagedFields = s.trackReview(c, reviewKinds[3], "", &r)
	if err := validateSubject(r.Spec); err != nil {
		return err
	}
	st, err := s.accessReview(c.Request().Context(), subjectOf(r.Spec), r.Spec.ResourceAttributes, r.Spec.NonResourceAttributes)
	if err != nil {
		return err
	}
	r.Status = st
	return c.JSON(http.StatusCreated, &r)
}

// localSubjectAccessReview serves POST
// /apis/authorization.k8s.io/v1/namespaces/<namespace>/localsubjectaccessreviews: a subject
// access review about the path's namespace only.
func (s *Server) localSubjectAccessReview(c *echo.Context) error {
	var r authorizationv1.LocalSubjectAccessReview
	if err := s.decodeReview(c, reviewKinds[4], &r); err != nil {
		return err
	}
	r.ManagedFields = s.trackReview(c, reviewKinds[4], "", &r)
	ns := c.Param("namespace")
	if r.Namespace == "" {
		r.Namespace = ns
	}
	if r.Namespace != ns {
		return badRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if err := validateSubject(r.Spec); err != nil {
		return err
	}
	if a := r.Spec.ResourceAttributes; a == nil || a.Namespace != ns || r.Spec.NonResourceAttributes != nil {
		return apierrors.NewInvalid(schema.GroupKind{Group: "authorization.k8s.io", Kind: "LocalSubjectAccessReview"}, "",
			field.ErrorList{field.Invalid(field.NewPath("spec", "resourceAttributes", "namespace"), namespaceOf(a),
				"must match metadata.namespace")})
	}
	st, err := s.accessReview(c.Request().Context(), subjectOf(r.Spec), r.Spec.ResourceAttributes, nil)
	if err != nil {
		return err
	}
	r.Status = st
	return c.JSON(http.StatusCreated, &r)
}

func namespaceOf(a *authorizationv1.ResourceAttributes) string {
	if a == nil {
		return ""
	}
	return a.Namespace
}

// validateSubject: a subject access review names a user or a group (kube-apiserver's 422).
func validateSubject(spec authorizationv1.SubjectAccessReviewSpec) error {
	if spec.User == "" && len(spec.Groups) == 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: "authorization.k8s.io"}, "",
			field.ErrorList{field.Invalid(field.NewPath("spec", "user"), spec.User, "at least one of user or group must be specified")})
	}
	return nil
}

// subjectOf is the user a subject access review asks about.
func subjectOf(spec authorizationv1.SubjectAccessReviewSpec) user.Info {
	extra := map[string][]string{}
	for k, v := range spec.Extra {
		extra[k] = v
	}
	return &user.DefaultInfo{Name: spec.User, UID: spec.UID, Groups: spec.Groups, Extra: extra}
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
	ctx := c.Request().Context()
	u := reviewUser(ctx)
	rules, err := s.authz().Rules(ctx, &user.DefaultInfo{Name: u.Username, UID: u.UID, Groups: u.Groups}, r.Spec.Namespace)
	st := rulesReview(rules)
	if err != nil {
		st.Incomplete, st.EvaluationError = true, err.Error()
	}
	// As kube-apiserver: the answer is a new review, its status only.
	return c.JSON(http.StatusCreated, &authorizationv1.SelfSubjectRulesReview{TypeMeta: r.TypeMeta, Status: st})
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

// tokenReview serves POST /apis/authentication.k8s.io/v1/tokenreviews: whom a bearer token
// (a static token or a ServiceAccount token) authenticates.
func (s *Server) tokenReview(c *echo.Context) error {
	var r authenticationv1.TokenReview
	if err := s.decodeReview(c, reviewKinds[5], &r); err != nil {
		return err
	}
	r.ManagedFields = s.trackReview(c, reviewKinds[5], "", &r)
	if r.Spec.Token == "" {
		return apierrors.NewInvalid(schema.GroupKind{Group: "authentication.k8s.io", Kind: "TokenReview"}, "",
			field.ErrorList{field.Required(field.NewPath("spec", "token"), "")})
	}
	// The audiences the answer names: those asked for, or the server's own (the issuer).
	auds := r.Spec.Audiences
	if len(auds) == 0 {
		auds = []string{ServiceAccountIssuer}
	}
	r.Status = authenticationv1.TokenReviewStatus{Error: "invalid bearer token"}
	if u, ok := s.cfg.Tokens.Authenticate(r.Spec.Token); ok {
		r.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: auds,
			User: authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}}
	} else if u, tokenAuds, err := s.serviceAccountUser(c.Request().Context(), r.Spec.Token); err == nil &&
		slices.ContainsFunc(auds, func(a string) bool { return slices.Contains(tokenAuds, a) }) {
		r.Status = authenticationv1.TokenReviewStatus{Authenticated: true, Audiences: auds,
			User: authenticationv1.UserInfo{Username: u.Name, UID: u.UID, Groups: u.Groups}}
	}
	return c.JSON(http.StatusCreated, &r)
}

// accessReview answers an access review by the authorizer in force, once the spec names
// exactly one of resource or non-resource attributes (kube-apiserver's validation, 422
// otherwise: its Status names no kind, as kube-apiserver's, which takes it from the decoded
// review's emptied TypeMeta).
func (s *Server) accessReview(ctx context.Context, u user.Info, ra *authorizationv1.ResourceAttributes, nra *authorizationv1.NonResourceAttributes) (authorizationv1.SubjectAccessReviewStatus, error) {
	if (ra == nil) == (nra == nil) {
		// The value as kube-apiserver quotes it: its internal type, which has no JSON names.
		var value any
		if a := nra; a != nil {
			value = struct{ Path, Verb string }{a.Path, a.Verb}
		}
		return authorizationv1.SubjectAccessReviewStatus{}, apierrors.NewInvalid(
			schema.GroupKind{Group: "authorization.k8s.io"}, "",
			field.ErrorList{field.Invalid(field.NewPath("spec"), value,
				"exactly one of nonResourceAttributes or resourceAttributes must be specified")})
	}
	attrs := authorizer.AttributesRecord{User: u}
	if ra != nil {
		attrs.Verb, attrs.Namespace, attrs.APIGroup, attrs.APIVersion = ra.Verb, ra.Namespace, ra.Group, ra.Version
		attrs.Resource, attrs.Subresource, attrs.Name, attrs.ResourceRequest = ra.Resource, ra.Subresource, ra.Name, true
	} else {
		attrs.Verb, attrs.Path = nra.Verb, nra.Path
	}
	d, reason, err := s.authz().Authorize(ctx, attrs)
	st := authorizationv1.SubjectAccessReviewStatus{Allowed: d == authorizer.DecisionAllow, Denied: d == authorizer.DecisionDeny, Reason: reason}
	if err != nil {
		st.EvaluationError = err.Error()
	}
	return st, nil
}

// rulesReview is a rules review's status listing rules.
func rulesReview(rules []rbacv1.PolicyRule) authorizationv1.SubjectRulesReviewStatus {
	st := authorizationv1.SubjectRulesReviewStatus{ResourceRules: []authorizationv1.ResourceRule{}, NonResourceRules: []authorizationv1.NonResourceRule{}}
	for _, r := range rules {
		if len(r.NonResourceURLs) > 0 {
			st.NonResourceRules = append(st.NonResourceRules, authorizationv1.NonResourceRule{Verbs: r.Verbs, NonResourceURLs: r.NonResourceURLs})
			continue
		}
		st.ResourceRules = append(st.ResourceRules, authorizationv1.ResourceRule{Verbs: r.Verbs, APIGroups: r.APIGroups, Resources: r.Resources, ResourceNames: r.ResourceNames})
	}
	return st
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

// trackReview returns the managedFields kube-apiserver's create handler gives r, a review (or
// a TokenRequest: sub "token") of kind k just decoded and defaulted, before its storage
// answers it: the fields the request set are its manager's (the field manager, or the user
// agent), an Update. The access reviews, TokenReview and TokenRequest answer with them; the
// reviews that answer a new object (SelfSubjectRulesReview, SelfSubjectReview) carry none.
func (s *Server) trackReview(c *echo.Context, k *kinds.Kind, sub string, r runtime.Object) []metav1.ManagedFieldsEntry {
	o, err := parseWriteOptions(c, createOpts)
	if err != nil {
		return nil
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(r)
	if err != nil {
		return nil
	}
	zero := reflect.New(reflect.TypeOf(r).Elem()).Interface().(runtime.Object)
	s.cfg.Registry.TrackAnswer(registry.Target{Kind: k, Sub: sub}, zero, obj, o)
	md, _ := obj["metadata"].(map[string]any)
	var tracked metav1.ObjectMeta
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(map[string]any{"managedFields": md["managedFields"]}, &tracked); err != nil {
		return nil
	}
	return tracked.ManagedFields
}

// methodNotAllowed answers a verb a resource does not take (GET on a review).
func methodNotAllowed(*echo.Context) error { return echo.ErrMethodNotAllowed }
