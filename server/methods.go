package server

import (
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// What kube-apiserver answers for a method a path does not take, and for a path nothing
// serves. Built-in kinds answer as its generic API installer does (405, or the JSON 404 "the
// server could not find the requested resource"); custom resources as the
// apiextensions-apiserver's handler does, which reads every method as a verb of the resource
// (a POST to an object is a create, a PUT to a collection lacks a name) and hands a path it
// does not serve to the plain-text "404 page not found".

// customPatchTypes are the patch media types a custom resource takes, in a 415's order.
var customPatchTypes = []string{"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml"}

// createNamed serves POST to an object's path: for a custom resource a create in its
// collection, named by the body (the name in the URL is not read, as in kube-apiserver).
func (s *Server) createNamed(c *echo.Context) error {
	t, err := s.parseTarget(c)
	if err != nil {
		return err
	}
	if t.Kind.BuiltIn() {
		return echo.ErrMethodNotAllowed
	}
	return s.createObject(c)
}

// writeCollection serves PUT and PATCH to a collection: a custom resource's answer is the
// missing name (after the patch type's check), a built-in kind's a 405.
func (s *Server) writeCollection(c *echo.Context) error {
	t, err := s.parseTarget(c)
	if err != nil {
		return err
	}
	if t.Kind.BuiltIn() {
		return echo.ErrMethodNotAllowed
	}
	if c.Request().Method == http.MethodPatch && !slices.Contains(customPatchTypes, patchType(c.Request())) {
		return registry.UnsupportedMediaType(strings.Join(customPatchTypes, ", "))
	}
	return badRequest("name must be provided")
}

// postSubresource serves POST to an object's subresource: a Pod's binding and eviction
// (pods.go), a ServiceAccount's token (tokenrequest.go), or opemu's reconcile trigger. Each
// refuses, through parseTarget, a kind that does not have its subresource.
func (s *Server) postSubresource(c *echo.Context) error {
	switch c.Param("sub") {
	case "binding":
		return s.bindPod(c)
	case "eviction":
		return s.evictPod(c)
	case "token":
		return s.tokenRequest(c)
	}
	return s.triggerReconcile(c)
}

// deleteSubresource serves DELETE to a subresource, which no kind takes.
func (s *Server) deleteSubresource(c *echo.Context) error {
	t, err := s.parseTarget(c)
	if err != nil {
		return err
	}
	return methodNotSupported(t, "delete")
}

// methodNotSupported refuses verb on t: a custom resource's status or scale names the resource
// and the verb, as the apiextensions-apiserver does; anything else is the generic 405.
func methodNotSupported(t registry.Target, verb string) error {
	if t.Kind.BuiltIn() || (t.Sub != "status" && t.Sub != "scale") {
		return echo.ErrMethodNotAllowed
	}
	return apierrors.NewMethodNotSupported(schema.GroupResource{Group: t.Kind.Group, Resource: t.Kind.Plural}, verb)
}

// routeNotFound answers a path no route serves: under /api (and /version/) kube-apiserver's
// JSON 404, under /apis the 404 of the group, anywhere else the plain-text page.
func (s *Server) routeNotFound(c *echo.Context) error {
	p := c.Request().URL.Path
	switch {
	case p == "/api" || strings.HasPrefix(p, "/api/") || strings.HasPrefix(p, "/version/"):
		return echo.ErrNotFound
	case strings.HasPrefix(p, "/apis/"):
		group, _, _ := strings.Cut(strings.TrimPrefix(p, "/apis/"), "/")
		return s.notServed(group)
	}
	return errPageNotFound
}
