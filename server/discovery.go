package server

import (
	"bytes"
	"cmp"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v5"
	"github.com/munnerz/goautoneg"
	"github.com/opemu/opemu/kinds"
	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/version"
)

// Discovery (SPEC §4.2, §18): /api, /api/v1, /apis, /apis/{g}, /apis/{g}/{v} in the legacy
// shapes, and /api and /apis in the aggregated form (apidiscovery.k8s.io/v2
// APIGroupDiscoveryList: every group, version and resource in one answer) when the Accept header
// offers it, as kubectl and client-go do. Both are built from the served kinds as kube-apiserver
// builds them: groups in kube's priority order, versions by kube's version priority (the first is
// the preferred one), resources by name, verbs, storage version hashes, categories.

// aggregatedContentType is the media type of aggregated discovery (client-go's AcceptV2).
const aggregatedContentType = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"

// groupPriorities is the order kube-apiserver lists its built-in groups in (the APIService
// priorities of cmd/kube-apiserver/app/aggregator.go and pkg/controlplane/apiserver); groups
// of CRDs come after them (priority 1000), by name.
var groupPriorities = map[string]int{
	"": 18000, "apps": 17800, "events.k8s.io": 17750, "authentication.k8s.io": 17700, "authorization.k8s.io": 17600,
	"autoscaling": 17500, "batch": 17400, "certificates.k8s.io": 17300, "networking.k8s.io": 17200, "policy": 17100,
	"rbac.authorization.k8s.io": 17000, "storage.k8s.io": 16800, "admissionregistration.k8s.io": 16700,
	"apiextensions.k8s.io": 16700, "scheduling.k8s.io": 16600, "coordination.k8s.io": 16500, "node.k8s.io": 16300,
	"discovery.k8s.io": 16200, "resource.k8s.io": 16200, "flowcontrol.apiserver.k8s.io": 16100, "storagemigration.k8s.io": 15800,
}

// customGroupPriority is the priority of a CRD's group.
const customGroupPriority = 1000

// Verbs as kube-apiserver lists them: a built-in resource's sorted, a CRD's in the order the
// apiextensions-apiserver writes them.
var (
	builtinVerbs     = metav1.Verbs{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	customVerbs      = metav1.Verbs{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"}
	namespaceVerbs   = metav1.Verbs{"create", "delete", "get", "list", "patch", "update", "watch"}
	subresourceVerbs = metav1.Verbs{"get", "patch", "update"}
	reviewVerbs      = metav1.Verbs{"create"}
)

// verbsOf returns the verbs discovery lists for k. Namespaces have no deletecollection (kube
// serves none: deleting every namespace at once is not an operation).
func verbsOf(k *kinds.Kind) metav1.Verbs {
	switch {
	case !k.BuiltIn():
		return customVerbs
	case k.GroupResource() == kinds.Namespaces:
		return namespaceVerbs
	}
	return builtinVerbs
}

// hasVerb reports whether k's resource takes verb.
func hasVerb(k *kinds.Kind, verb string) bool { return slices.Contains(verbsOf(k), verb) }

// storageVersionHash is the hash discovery gives a resource stored as group/version/kind, as
// k8s.io/apiserver/pkg/endpoints/discovery.StorageVersionHash computes it (that package links
// the apiserver's whole response machinery for these four lines).
func storageVersionHash(group, version, kind string) string {
	sum := sha256.Sum256([]byte(group + "/" + version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}

// discoveryDoc is discovery for one generation of the served kinds, built once and shared:
// readers must not modify it.
type discoveryDoc struct {
	groups    []metav1.APIGroup                  // /apis (legacy), in kube's order
	resources map[string]*metav1.APIResourceList // by group/version ("v1" for core)
	builtin   map[string]bool                    // the groups of built-in kinds ("" for core)
	// aggregated /api and /apis, encoded, with their ETags.
	api, apis         []byte
	apiETag, apisETag string
}

// discoveryCache keeps the discoveryDoc of the served kinds' current generation.
type discoveryCache struct {
	mu  sync.Mutex
	gen uint64
	doc *discoveryDoc // guarded by mu; nil until first built
}

// discovery returns the discovery of the kinds served now.
func (s *Server) discovery() *discoveryDoc {
	c := &s.discoveryCache
	c.mu.Lock()
	defer c.mu.Unlock()
	if gen := s.cfg.Kinds.Generation(); c.doc == nil || c.gen != gen {
		c.doc, c.gen = buildDiscovery(s.cfg.Kinds), gen
	}
	return c.doc
}

// discoveredVersion is one group-version: its resources in both forms.
type discoveredVersion struct {
	version    string
	legacy     []metav1.APIResource
	aggregated []apidiscoveryv2.APIResourceDiscovery
}

func buildDiscovery(served *kinds.Registry) *discoveryDoc {
	byGV := map[[2]string]*discoveredVersion{}
	builtin := map[string]bool{"": true}
	for _, k := range append(served.All(), reviewKinds...) {
		gv := [2]string{k.Group, k.Version}
		v, ok := byGV[gv]
		if !ok {
			v = &discoveredVersion{version: k.Version}
			byGV[gv] = v
		}
		if k.BuiltIn() {
			builtin[k.Group] = true
		}
		v.legacy = append(v.legacy, legacyResources(served, k)...)
		v.aggregated = append(v.aggregated, aggregatedResource(k))
	}
	versions := map[string][]*discoveredVersion{}
	for gv, v := range byGV {
		// Built-in resources by path ("deployments", "deployments/scale", "deployments/status");
		// a CRD's subresources follow it (status, then scale) as the apiextensions-apiserver
		// lists them.
		// (sort.Slice rather than slices.SortFunc: no copy of the sort per element type.)
		sort.SliceStable(v.legacy, func(i, j int) bool {
			return discoveredResource(v.legacy[i].Name) < discoveredResource(v.legacy[j].Name)
		})
		sort.Slice(v.aggregated, func(i, j int) bool { return v.aggregated[i].Resource < v.aggregated[j].Resource })
		versions[gv[0]] = append(versions[gv[0]], v)
	}
	doc := &discoveryDoc{resources: map[string]*metav1.APIResourceList{}, builtin: builtin}
	var groups []string
	for g, vs := range versions {
		sort.Slice(vs, func(i, j int) bool { return version.CompareKubeAwareVersionStrings(vs[i].version, vs[j].version) > 0 })
		groups = append(groups, g)
	}
	slices.SortFunc(groups, func(a, b string) int {
		return cmp.Or(-cmp.Compare(groupPriority(a), groupPriority(b)), cmp.Compare(a, b))
	})
	api := apidiscoveryv2.APIGroupDiscoveryList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupDiscoveryList", APIVersion: "apidiscovery.k8s.io/v2"}}
	apis := api
	for _, g := range groups {
		group := metav1.APIGroup{Name: g}
		agg := apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: g}}
		for _, v := range versions[g] {
			gv := metav1.GroupVersion{Group: g, Version: v.version}.String()
			list := &metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv, APIResources: v.legacy}
			if g == "" {
				list.APIVersion = "" // kube's /api/v1 names no apiVersion
			}
			doc.resources[gv] = list
			group.Versions = append(group.Versions, metav1.GroupVersionForDiscovery{GroupVersion: gv, Version: v.version})
			agg.Versions = append(agg.Versions, apidiscoveryv2.APIVersionDiscovery{
				Version: v.version, Resources: v.aggregated, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent,
			})
		}
		if g == "" {
			api.Items = append(api.Items, agg)
			continue
		}
		group.PreferredVersion = group.Versions[0]
		doc.groups = append(doc.groups, group)
		apis.Items = append(apis.Items, agg)
	}
	doc.api, doc.apiETag = encodeDiscovery(&api)
	doc.apis, doc.apisETag = encodeDiscovery(&apis)
	return doc
}

func groupPriority(g string) int {
	if p, ok := groupPriorities[g]; ok {
		return p
	}
	return customGroupPriority
}

// discoveredResource is the resource of a discovery name ("deployments" of
// "deployments/scale").
func discoveredResource(name string) string {
	r, _, _ := strings.Cut(name, "/")
	return r
}

func encodeDiscovery(v *apidiscoveryv2.APIGroupDiscoveryList) ([]byte, string) {
	b, _ := json.Marshal(v)
	return b, `"` + docHash(b) + `"`
}

// legacyResources are the APIResources of k: its resource, then its subresources.
func legacyResources(served *kinds.Registry, k *kinds.Kind) []metav1.APIResource {
	if isReview(k) {
		return []metav1.APIResource{{Name: k.Plural, SingularName: k.Singular, Namespaced: k.Namespaced, Kind: k.Kind, Verbs: reviewVerbs}}
	}
	out := []metav1.APIResource{{
		Name: k.Plural, SingularName: k.Singular, Namespaced: k.Namespaced, Kind: k.Kind, Verbs: verbsOf(k),
		ShortNames: k.ShortNames, Categories: k.Categories, StorageVersionHash: storedAsHash(served, k),
	}}
	status := metav1.APIResource{Name: k.Plural + "/status", Namespaced: k.Namespaced, Kind: k.Kind, Verbs: subresourceVerbs}
	scale := metav1.APIResource{Name: k.Plural + "/scale", Namespaced: k.Namespaced, Group: "autoscaling", Version: "v1", Kind: "Scale", Verbs: subresourceVerbs}
	if k.Status {
		out = append(out, status)
	}
	if k.Finalize {
		out = append(out, metav1.APIResource{Name: k.Plural + "/finalize", Namespaced: k.Namespaced, Kind: k.Kind, Verbs: metav1.Verbs{"update"}})
	}
	if k.Scale != nil {
		out = append(out, scale)
	}
	if k.Schedulable {
		out = append(out,
			metav1.APIResource{Name: k.Plural + "/binding", Namespaced: k.Namespaced, Kind: "Binding", Verbs: metav1.Verbs{"create"}},
			metav1.APIResource{Name: k.Plural + "/eviction", Namespaced: k.Namespaced, Group: "policy", Version: "v1", Kind: "Eviction", Verbs: metav1.Verbs{"create"}})
	}
	if k.BuiltIn() {
		sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	}
	return out
}

// storedAsHash is the storage version hash of k's resource: of the kind its objects are stored
// as (a view's, as events.k8s.io Events', is its storage's).
func storedAsHash(served *kinds.Registry, k *kinds.Kind) string {
	if k.Conversion != nil {
		if st, ok := served.Resource(k.Conversion.Storage); ok {
			k = st
		}
	}
	return storageVersionHash(k.Group, k.StorageVersion, k.Kind)
}

// aggregatedResource is k in aggregated discovery. As kube-apiserver writes it, the response
// kind of a built-in resource names no group or version; a CRD's names both.
func aggregatedResource(k *kinds.Kind) apidiscoveryv2.APIResourceDiscovery {
	kind := &metav1.GroupVersionKind{Kind: k.Kind}
	if !k.BuiltIn() {
		kind.Group, kind.Version = k.Group, k.Version
	}
	scope := apidiscoveryv2.ScopeCluster
	if k.Namespaced {
		scope = apidiscoveryv2.ScopeNamespace
	}
	r := apidiscoveryv2.APIResourceDiscovery{
		Resource: k.Plural, ResponseKind: kind, Scope: scope, SingularResource: k.Singular, Verbs: verbsOf(k),
		ShortNames: k.ShortNames, Categories: k.Categories,
	}
	if isReview(k) {
		r.Verbs = reviewVerbs
		return r
	}
	if k.Status {
		r.Subresources = append(r.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: "status", ResponseKind: kind, Verbs: subresourceVerbs})
	}
	if k.Finalize {
		r.Subresources = append(r.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: "finalize", ResponseKind: kind, Verbs: metav1.Verbs{"update"}})
	}
	if k.Scale != nil {
		r.Subresources = append(r.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: "scale",
			ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, Verbs: subresourceVerbs})
	}
	if k.Schedulable {
		r.Subresources = append(r.Subresources,
			apidiscoveryv2.APISubresourceDiscovery{Subresource: "binding", ResponseKind: &metav1.GroupVersionKind{Kind: "Binding"}, Verbs: metav1.Verbs{"create"}},
			apidiscoveryv2.APISubresourceDiscovery{Subresource: "eviction", ResponseKind: &metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"}, Verbs: metav1.Verbs{"create"}})
	}
	if k.BuiltIn() {
		sort.Slice(r.Subresources, func(i, j int) bool { return r.Subresources[i].Subresource < r.Subresources[j].Subresource })
	}
	return r
}

// wantsAggregated reports whether the Accept header offers aggregated discovery in JSON.
// Wherever it comes in the header, kube-apiserver answers the aggregated form when it is
// offered at all: its discovery handlers accept no other conversion.
func wantsAggregated(r *http.Request) bool {
	for _, clause := range goautoneg.ParseAccept(r.Header.Get("Accept")) {
		json := clause.Type == "*" || (clause.Type == "application" && (clause.SubType == "json" || clause.SubType == "*"))
		if json && clause.Params["g"] == "apidiscovery.k8s.io" && clause.Params["v"] == "v2" && clause.Params["as"] == "APIGroupDiscoveryList" {
			return true
		}
	}
	return false
}

// writeAggregated answers aggregated discovery with its ETag (a client's If-None-Match gets
// 304), as kube-apiserver does.
func writeAggregated(c *echo.Context, body []byte, etag string) error {
	w := c.Response()
	w.Header().Set("Content-Type", aggregatedContentType)
	w.Header().Set("Vary", "Accept")
	w.Header().Set("Etag", etag)
	http.ServeContent(w, c.Request(), "", time.Time{}, bytes.NewReader(body))
	return nil
}

func (s *Server) apiVersions(c *echo.Context) error {
	if wantsAggregated(c.Request()) {
		d := s.discovery()
		return writeAggregated(c, d.api, d.apiETag)
	}
	return c.JSON(http.StatusOK, &metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
		ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: c.Request().Host}}})
}

func (s *Server) apiGroupList(c *echo.Context) error {
	d := s.discovery()
	if wantsAggregated(c.Request()) {
		return writeAggregated(c, d.apis, d.apisETag)
	}
	return c.JSON(http.StatusOK, &metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}, Groups: d.groups})
}

func (s *Server) apiGroup(c *echo.Context) error {
	for _, g := range s.discovery().groups {
		if g.Name == c.Param("group") {
			g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
			return c.JSON(http.StatusOK, &g)
		}
	}
	return s.notServed(c.Param("group"))
}

func (s *Server) coreResources(c *echo.Context) error {
	list, ok := s.discovery().resources[c.Param("version")]
	if !ok || c.Param("version") != "v1" {
		return echo.ErrNotFound
	}
	return c.JSON(http.StatusOK, list)
}

func (s *Server) groupResources(c *echo.Context) error {
	list, ok := s.discovery().resources[c.Param("group")+"/"+c.Param("version")]
	if !ok {
		return s.notServed(c.Param("group"))
	}
	return c.JSON(http.StatusOK, list)
}

// notServed is the 404 of a path under group that no resource serves: kube-apiserver's JSON
// Status under the groups it builds in, its plain-text page under any other (the
// apiextensions-apiserver hands such paths to the server's not-found handler).
func (s *Server) notServed(group string) error {
	if s.discovery().builtin[group] {
		return echo.ErrNotFound
	}
	return errPageNotFound
}
