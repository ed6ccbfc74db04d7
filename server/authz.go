package server

import (
	"context"
	"net/http"
	"strings"

	"github.com/labstack/echo/v5"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/filters/impersonation"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
)

// Authorization (AUTHORIZATION_MODE, SPEC §13): every request's user, verb and resource, as
// kube-apiserver's request-info resolver reads them from the URL, go to Config.Authorizer; a
// request it does not allow is kube-apiserver's 403, worded as kube-apiserver words it.
// Impersonation (Impersonate-User, -Group, -Uid, -Extra-*) is kube-apiserver's own filter.

// Authorizer decides requests (*rbac.Authorizer with AUTHORIZATION_MODE=RBAC).
type Authorizer interface {
	authorizer.UnconditionalAuthorizer
	// Rules returns the rules that apply to u in namespace (cluster-wide ones only when ""),
	// for SelfSubjectRulesReview.
	Rules(ctx context.Context, u user.Info, namespace string) ([]rbacv1.PolicyRule, error)
}

// alwaysAllow is the authorizer when Config.Authorizer is nil (AUTHORIZATION_MODE=AlwaysAllow).
type alwaysAllow struct{}

func (alwaysAllow) Authorize(context.Context, authorizer.Attributes) (authorizer.Decision, string, error) {
	return authorizer.DecisionAllow, allowedReason, nil
}

func (alwaysAllow) Rules(context.Context, user.Info, string) ([]rbacv1.PolicyRule, error) {
	return []rbacv1.PolicyRule{
		{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
		{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
	}, nil
}

// authz is the authorizer in force: Config.Authorizer, or one allowing everything.
func (s *Server) authz() Authorizer {
	if s.cfg.Authorizer == nil {
		return alwaysAllow{}
	}
	return s.cfg.Authorizer
}

var requestInfos = &genericrequest.RequestInfoFactory{
	APIPrefixes:          sets.NewString("api", "apis"),
	GrouplessAPIPrefixes: sets.NewString("api"),
}

// requestAttributes are r's authorization attributes, as kube-apiserver's
// filters.GetAuthorizerAttributes makes them.
func requestAttributes(r *http.Request, u user.Info) (authorizer.AttributesRecord, error) {
	info, err := requestInfos.NewRequestInfo(r)
	if err != nil {
		return authorizer.AttributesRecord{}, err
	}
	return authorizer.AttributesRecord{
		User: u, Verb: info.Verb, Namespace: info.Namespace, APIGroup: info.APIGroup, APIVersion: info.APIVersion,
		Resource: info.Resource, Subresource: info.Subresource, Name: info.Name,
		ResourceRequest: info.IsResourceRequest, Path: info.Path,
	}, nil
}

// authorize returns nil when Config.Authorizer allows r by u, else kube-apiserver's 403.
func (s *Server) authorize(r *http.Request, u user.Info) error {
	attrs, err := requestAttributes(r, u)
	if err != nil {
		return err
	}
	d, reason, err := s.cfg.Authorizer.Authorize(r.Context(), attrs)
	if err == nil && d == authorizer.DecisionAllow {
		return nil
	}
	return responsewriters.ForbiddenStatusError(attrs, reason)
}

// statusCodecs encode the Status objects kube-apiserver's impersonation filter answers with.
var statusCodecs = func() runtime.NegotiatedSerializer {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(scheme).WithoutConversion()
}()

// impersonating reports whether r asks to act as another user.
func impersonating(r *http.Request) bool {
	for h := range r.Header {
		if strings.HasPrefix(h, "Impersonate-") {
			return true
		}
	}
	return false
}

// impersonated carries what kube-apiserver's impersonation filter hands on: the request with
// the user it acts as in its context.
type impersonated struct {
	req  *http.Request
	user user.Info
}

type impersonatedKey struct{}

// newImpersonator returns kube-apiserver's impersonation filter (v1.37 runs the constrained
// one: the impersonate-on verbs, then the legacy impersonate verb) over a handler that hands
// the result back through the request's *impersonated.
func newImpersonator(a authorizer.UnconditionalAuthorizer) http.Handler {
	return impersonation.WithConstrainedImpersonation(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if h, ok := r.Context().Value(impersonatedKey{}).(*impersonated); ok {
			h.req = r
			h.user, _ = genericrequest.UserFrom(r.Context())
		}
	}), a, statusCodecs)
}

// impersonate returns the user requestor acts as by r's Impersonate-* headers, each checked
// by kube-apiserver's impersonation filter, and the request carrying it. A nil user: the
// filter answered (a 403, a bad header) when err is nil too.
func (s *Server) impersonate(c *echo.Context, requestor user.Info) (user.Info, error) {
	r := c.Request()
	info, err := requestInfos.NewRequestInfo(r)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	h := &impersonated{}
	ctx := context.WithValue(genericrequest.WithRequestInfo(genericrequest.WithUser(r.Context(), requestor), info), impersonatedKey{}, h)
	s.impersonator.ServeHTTP(c.Response(), r.WithContext(ctx))
	if h.user == nil {
		return nil, nil
	}
	c.SetRequest(h.req)
	return h.user, nil
}

// userInfo is u as k8s.io/apiserver names a user.
func userInfo(u User) user.Info {
	return &user.DefaultInfo{Name: u.Name, UID: u.UID, Groups: u.Groups}
}

// userOf is the inverse of userInfo.
func userOf(u user.Info) User {
	return User{Name: u.GetName(), UID: u.GetUID(), Groups: u.GetGroups()}
}
