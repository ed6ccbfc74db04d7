package server

import (
	"net/http"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/kinds"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Discovery (SPEC §4.2): /version, /api, /api/v1, /apis, /apis/{g}, /apis/{g}/{v} in the legacy
// shapes kubectl and client-go accept (reference/kubectl-compat.md §1.2).

// versionInfo is what /version reports: minor 32, so the kubectl dispatcher picks kubectl 1.32.
var versionInfo = map[string]string{
	"major": "1", "minor": "32", "gitVersion": "v1.32.0-opemu", "gitCommit": "0000000000000000000000000000000000000000",
	"gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z", "goVersion": "go1.26", "compiler": "gc", "platform": "linux/amd64",
}

func (s *Server) version(c *echo.Context) error { return c.JSON(http.StatusOK, versionInfo) }

// servedKinds returns every kind served, built-in first.
func (s *Server) servedKinds() []*kinds.Kind { return s.cfg.Kinds.All() }

func verbsOf(*kinds.Kind) metav1.Verbs {
	return metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
}

// resourceList is the APIResourceList of group/version.
func (s *Server) resourceList(group, version string) (*metav1.APIResourceList, bool) {
	gv := version
	if group != "" {
		gv = group + "/" + version
	}
	list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv, APIResources: []metav1.APIResource{}}
	reviews := reviewResources(group, version)
	found := len(reviews) > 0
	for _, k := range s.servedKinds() {
		if k.Group != group || k.Version != version {
			continue
		}
		found = true
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: k.Plural, SingularName: k.Singular, Namespaced: k.Namespaced, Kind: k.Kind,
			Verbs: verbsOf(k), ShortNames: k.ShortNames, Categories: k.Categories,
		})
		if k.Status {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: k.Plural + "/status", Namespaced: k.Namespaced, Kind: k.Kind, Verbs: metav1.Verbs{"get", "patch", "update"}})
		}
		if k.Finalize {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: k.Plural + "/finalize", Namespaced: k.Namespaced, Kind: k.Kind, Verbs: metav1.Verbs{"update"}})
		}
		if k.Scale != nil {
			list.APIResources = append(list.APIResources, metav1.APIResource{Name: k.Plural + "/scale", Namespaced: k.Namespaced, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: metav1.Verbs{"get", "patch", "update"}})
		}
	}
	list.APIResources = append(list.APIResources, reviews...)
	return list, found
}

// groups returns the API groups (not core), each with its served versions, storage first.
func (s *Server) groups() []metav1.APIGroup {
	byGroup := map[string]*metav1.APIGroup{}
	var order []string
	for _, k := range append(s.servedKinds(), reviewKinds...) {
		if k.Group == "" {
			continue
		}
		g, ok := byGroup[k.Group]
		if !ok {
			g = &metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: k.Group}
			byGroup[k.Group] = g
			order = append(order, k.Group)
		}
		gvd := metav1.GroupVersionForDiscovery{GroupVersion: k.GroupVersion(), Version: k.Version}
		dup := false
		for _, v := range g.Versions {
			dup = dup || v == gvd
		}
		if dup {
			continue
		}
		if k.Version == k.StorageVersion {
			g.Versions = append([]metav1.GroupVersionForDiscovery{gvd}, g.Versions...)
			g.PreferredVersion = gvd
		} else {
			g.Versions = append(g.Versions, gvd)
		}
	}
	out := make([]metav1.APIGroup, 0, len(order))
	for _, name := range order {
		g := byGroup[name]
		if g.PreferredVersion.Version == "" && len(g.Versions) > 0 {
			g.PreferredVersion = g.Versions[0]
		}
		out = append(out, *g)
	}
	return out
}

func (s *Server) apiVersions(c *echo.Context) error {
	return c.JSON(http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: c.Request().Host}}})
}

func (s *Server) apiGroupList(c *echo.Context) error {
	return c.JSON(http.StatusOK, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: s.groups()})
}

func (s *Server) apiGroup(c *echo.Context) error {
	for _, g := range s.groups() {
		if g.Name == c.Param("group") {
			return c.JSON(http.StatusOK, g)
		}
	}
	return echo.ErrNotFound
}

func (s *Server) coreResources(c *echo.Context) error {
	if c.Param("version") != "v1" {
		return echo.ErrNotFound
	}
	list, _ := s.resourceList("", "v1")
	return c.JSON(http.StatusOK, list)
}

func (s *Server) groupResources(c *echo.Context) error {
	list, ok := s.resourceList(c.Param("group"), c.Param("version"))
	if !ok {
		return echo.ErrNotFound
	}
	return c.JSON(http.StatusOK, list)
}
