package server

import (
	"net/http"
	"net/http/pprof"

	"github.com/labstack/echo/v5"
)

// routes registers every route on one screen (SPEC §4.1 and §4.2).
func (s *Server) routes() {
	e := s.echo
	// The product's own routes.
	e.GET("/", s.root)
	for _, endpoint := range []string{"healthz", "livez", "readyz"} {
		e.GET("/"+endpoint, s.health(endpoint))
		e.GET("/"+endpoint+"/:check", s.healthCheckOne(endpoint))
	}
	e.GET("/leader", s.leader)
	e.GET("/crd", s.applicationCRD)
	e.GET("/crds", s.listCRDs)
	e.POST("/validate", s.review(false))
	e.POST("/mutate", s.review(true))
	e.GET("/metrics", s.metrics)
	e.GET("/watch", s.sseWatch)
	e.GET("/controller", s.controllers)
	e.POST("/controller/pause", s.controlLoop(true))
	e.POST("/controller/resume", s.controlLoop(false))
	e.POST("/controller/step", s.stepLoop)
	e.GET("/clock", s.getClock)
	e.POST("/clock/advance", s.advanceClock)
	e.POST(snapshotPath, s.takeSnapshot)
	e.POST(snapshotRestorePath, s.restoreSnapshot)
	e.GET(callsPath, s.listCalls)
	e.GET(callsStreamPath, s.streamCalls)
	e.GET(callsRBACPath, s.callsRBAC)
	s.uiRoutes()

	// Discovery.
	e.GET("/version", s.version)
	e.GET("/api", s.apiVersions)
	e.GET("/api/:version", s.coreResources)
	e.GET("/apis", s.apiGroupList)
	e.GET("/apis/:group", s.apiGroup)
	e.GET("/apis/:group/:version", s.groupResources)
	e.GET("/openapi/v2", s.openAPIV2)
	e.GET("/openapi/v3", s.openAPIRoot)
	e.GET("/openapi/v3/*", s.openAPIDocument)

	// Reviews: created and answered, never stored (reviews.go).
	for path, create := range map[string]echo.HandlerFunc{
		"/apis/authorization.k8s.io/v1/selfsubjectaccessreviews":                        s.selfSubjectAccessReview,
		"/apis/authorization.k8s.io/v1/selfsubjectrulesreviews":                         s.selfSubjectRulesReview,
		"/apis/authentication.k8s.io/v1/selfsubjectreviews":                             s.selfSubjectReview,
		"/apis/authorization.k8s.io/v1/subjectaccessreviews":                            s.subjectAccessReview,
		"/apis/authorization.k8s.io/v1/namespaces/:namespace/localsubjectaccessreviews": s.localSubjectAccessReview,
		"/apis/authentication.k8s.io/v1/tokenreviews":                                   s.tokenReview,
	} {
		e.POST(path, create)
		for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodPatch, http.MethodDelete} {
			e.Add(m, path, methodNotAllowed)
		}
	}

	e.GET("/events", s.queryEvents)
	e.GET("/events/stats", s.eventStats)

	// Resources: namespaced paths, then all-namespaces and cluster-scoped paths, for API groups
	// (/apis) and the core group (/api), and their deprecated watch paths (/watch/...: a
	// collection, or one object by name; other methods are refused as kube-apiserver does).
	for _, prefix := range []string{"/apis/:group/:version/watch/namespaces/:namespace", "/apis/:group/:version/watch",
		"/api/:version/watch/namespaces/:namespace", "/api/:version/watch"} {
		for _, path := range []string{prefix + "/:resource", prefix + "/:resource/:name"} {
			e.GET(path, s.watchObjects)
			for _, m := range []string{http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
				e.Add(m, path, methodNotAllowed)
			}
		}
	}
	for _, prefix := range []string{"/apis/:group/:version/namespaces/:namespace", "/apis/:group/:version",
		"/api/:version/namespaces/:namespace", "/api/:version"} {
		e.GET(prefix+"/:resource", s.listObjects)
		e.POST(prefix+"/:resource", s.createObject)
		e.DELETE(prefix+"/:resource", s.deleteCollection)
		e.PUT(prefix+"/:resource", s.writeCollection)
		e.PATCH(prefix+"/:resource", s.writeCollection)
		e.GET(prefix+"/:resource/:name", s.getObject)
		e.POST(prefix+"/:resource/:name", s.createNamed)
		e.PUT(prefix+"/:resource/:name", s.updateObject)
		e.PATCH(prefix+"/:resource/:name", s.patchObject)
		e.DELETE(prefix+"/:resource/:name", s.deleteObject)
		e.GET(prefix+"/:resource/:name/:sub", s.getObject)
		e.PUT(prefix+"/:resource/:name/:sub", s.updateObject)
		e.PATCH(prefix+"/:resource/:name/:sub", s.patchObject)
		e.POST(prefix+"/:resource/:name/:sub", s.postSubresource)
		e.DELETE(prefix+"/:resource/:name/:sub", s.deleteSubresource)
	}

	// A Namespace's subresources: /api/v1/namespaces/<name>/status would otherwise meet the
	// route of a namespaced collection (a resource "status" in namespace <name>).
	for _, sub := range []string{"status", "finalize"} {
		path := "/api/:version/namespaces/:name/" + sub
		e.GET(path, namespaceSubresource(sub, s.getObject))
		e.PUT(path, namespaceSubresource(sub, s.updateObject))
		e.PATCH(path, namespaceSubresource(sub, s.patchObject))
		e.POST(path, methodNotAllowed)
		e.DELETE(path, methodNotAllowed)
	}

	if s.cfg.PProf {
		e.GET("/debug/pprof/cmdline", echo.WrapHandler(http.HandlerFunc(pprof.Cmdline)))
		e.GET("/debug/pprof/profile", echo.WrapHandler(http.HandlerFunc(pprof.Profile)))
		e.GET("/debug/pprof/symbol", echo.WrapHandler(http.HandlerFunc(pprof.Symbol)))
		e.GET("/debug/pprof/trace", echo.WrapHandler(http.HandlerFunc(pprof.Trace)))
		e.GET("/debug/pprof/*", echo.WrapHandler(http.HandlerFunc(pprof.Index)))
	}
}

// namespaceSubresource serves h as the route of namespaces/<name>/<sub>.
func namespaceSubresource(sub string, h echo.HandlerFunc) echo.HandlerFunc {
	return func(c *echo.Context) error {
		c.SetPathValues(echo.PathValues{{Name: "version", Value: c.Param("version")}, {Name: "resource", Value: "namespaces"},
			{Name: "name", Value: c.Param("name")}, {Name: "sub", Value: sub}})
		return h(c)
	}
}
