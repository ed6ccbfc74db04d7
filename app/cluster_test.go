package app_test

import (
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/opemu/opemu/app"
)

// get decodes the object at path into out and returns the status code.
func get(t require.TestingT, base, path string, out any) int {
	resp, err := http.Get(base + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK && out != nil {
		require.NoError(t, json.NewDecoder(resp.Body).Decode(out))
	}
	return resp.StatusCode
}

func send(t *testing.T, method, url, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	return resp.StatusCode
}

// TestClusterObjects: what a cluster has from the start: the system namespaces, the kubernetes
// Service with its Endpoints and EndpointSlice pointing at this server's listener (put back
// when deleted), and the Nodes, Ready, whose Leases a step of the clock renews.
func TestClusterObjects(t *testing.T) {
	t.Parallel()
	clk := app.NewManualClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	base := serve(t, app.Config{Nodes: 2, Clock: clk, Logger: slog.New(slog.DiscardHandler)})
	host, port, err := net.SplitHostPort(strings.TrimPrefix(base, "http://"))
	require.NoError(t, err)

	for _, ns := range []string{"default", "kube-system", "kube-public", "kube-node-lease"} {
		assert.Equal(t, http.StatusOK, get(t, base, "/api/v1/namespaces/"+ns, nil), ns)
	}

	var svc corev1.Service
	require.Equal(t, http.StatusOK, get(t, base, "/api/v1/namespaces/default/services/kubernetes", &svc))
	assert.Equal(t, "10.96.0.1", svc.Spec.ClusterIP)
	require.Len(t, svc.Spec.Ports, 1)
	assert.Equal(t, "https", svc.Spec.Ports[0].Name)
	assert.Equal(t, int32(443), svc.Spec.Ports[0].Port)
	assert.Equal(t, port, svc.Spec.Ports[0].TargetPort.String())
	var eps corev1.Endpoints
	require.Equal(t, http.StatusOK, get(t, base, "/api/v1/namespaces/default/endpoints/kubernetes", &eps))
	require.Len(t, eps.Subsets, 1)
	assert.Equal(t, host, eps.Subsets[0].Addresses[0].IP)
	assert.Equal(t, port, strconv.Itoa(int(eps.Subsets[0].Ports[0].Port)))
	var slice discoveryv1.EndpointSlice
	require.Equal(t, http.StatusOK, get(t, base, "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes", &slice))
	assert.Equal(t, discoveryv1.AddressTypeIPv4, slice.AddressType)
	assert.Equal(t, []string{host}, slice.Endpoints[0].Addresses)
	assert.Equal(t, port, strconv.Itoa(int(*slice.Ports[0].Port)))
	resp, err := http.Get("http://" + net.JoinHostPort(eps.Subsets[0].Addresses[0].IP, port) + "/healthz")
	require.NoError(t, err, "a client reaches the server at its endpoint")
	resp.Body.Close()

	var list corev1.NodeList
	require.Equal(t, http.StatusOK, get(t, base, "/api/v1/nodes", &list))
	require.Len(t, list.Items, 2)
	assert.Equal(t, "opemu-control-plane", list.Items[0].Name)
	assert.Equal(t, "opemu-worker", list.Items[1].Name)
	var lease coordinationv1.Lease
	leasePath := "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/opemu-worker"
	require.Equal(t, http.StatusOK, get(t, base, leasePath, &lease))
	registered := lease.Spec.RenewTime.Time

	require.Equal(t, http.StatusOK, send(t, http.MethodDelete, base+"/api/v1/namespaces/default/endpoints/kubernetes", ""))
	clk.Step(10 * time.Second)
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		var l coordinationv1.Lease
		require.Equal(c, http.StatusOK, get(c, base, leasePath, &l))
		assert.True(c, l.Spec.RenewTime.Time.Equal(registered.Add(10*time.Second)), "renewed on the clock")
		assert.Equal(c, http.StatusOK, get(c, base, "/api/v1/namespaces/default/endpoints/kubernetes", nil), "put back")
	}, 10*time.Second, 10*time.Millisecond)
}

// TestNamespaceFinishes: with the cluster's controllers (testenv's shape), a deleted namespace
// is Terminating, then gone once its content is; without them it stays Terminating, as under a
// lone kube-apiserver.
func TestNamespaceFinishes(t *testing.T) {
	t.Parallel()
	for _, collector := range []bool{true, false} {
		base := serve(t, app.Config{EnableCollector: collector, Logger: slog.New(slog.DiscardHandler)})
		require.Equal(t, http.StatusCreated, send(t, http.MethodPost, base+"/api/v1/namespaces",
			`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"team"}}`))
		require.Equal(t, http.StatusCreated, send(t, http.MethodPost, base+"/api/v1/namespaces/team/configmaps",
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"}}`))
		require.Equal(t, http.StatusOK, send(t, http.MethodDelete, base+"/api/v1/namespaces/team", ""))
		if !collector {
			var ns corev1.Namespace
			require.Equal(t, http.StatusOK, get(t, base, "/api/v1/namespaces/team", &ns))
			assert.Equal(t, corev1.NamespaceTerminating, ns.Status.Phase)
			assert.Equal(t, http.StatusOK, get(t, base, "/api/v1/namespaces/team/configmaps/cm", nil))
			continue
		}
		require.EventuallyWithT(t, func(c *assert.CollectT) {
			assert.Equal(c, http.StatusNotFound, get(c, base, "/api/v1/namespaces/team", nil))
		}, 10*time.Second, 10*time.Millisecond)
		assert.Equal(t, http.StatusNotFound, get(t, base, "/api/v1/namespaces/team/configmaps/cm", nil))
	}
}

// TestNamespacesFromTheStart: the system namespaces exist from the start, and so does the
// namespace of opemu's own leader lease (the elector can take it there); nothing else makes a
// namespace: a create into a missing one is kube's 404 and creates nothing.
func TestNamespacesFromTheStart(t *testing.T) {
	t.Parallel()
	base := serve(t, app.Config{EnableLeaderElection: true, EnableController: true, LeaseBackend: "memory", LeaseNamespace: "opemu-system",
		RetryPeriod: 50 * time.Millisecond, Logger: slog.New(slog.DiscardHandler)})
	for _, name := range []string{"default", "kube-system", "kube-public", "kube-node-lease", "opemu-system"} {
		var ns corev1.Namespace
		require.Equal(t, http.StatusOK, get(t, base, "/api/v1/namespaces/"+name, &ns), name)
		assert.Equal(t, corev1.NamespaceActive, ns.Status.Phase, name)
	}
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		assert.Equal(c, http.StatusOK, get(c, base, "/apis/coordination.k8s.io/v1/namespaces/opemu-system/leases/elide-operator-leader", nil))
	}, 10*time.Second, 10*time.Millisecond, "the elector holds its lease there")

	assert.Equal(t, http.StatusNotFound, send(t, http.MethodPost, base+"/api/v1/namespaces/team/configmaps",
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cm"}}`))
	assert.Equal(t, http.StatusNotFound, get(t, base, "/api/v1/namespaces/team", nil))
}
