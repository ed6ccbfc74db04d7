package endpoints_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/endpoints"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/yaml"
)

var ctx = context.Background()

func create(t *testing.T, c *registry.Client, manifest string) {
	t.Helper()
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(manifest), &obj))
	md := obj["metadata"].(map[string]any)
	ns, _ := md["namespace"].(string)
	res := map[string]string{"Pod": "pods", "Service": "services", "Node": "nodes"}[obj["kind"].(string)]
	key := cache.Key{Resource: res, Namespace: ns, Name: md["name"].(string)}
	st, hasStatus := obj["status"]
	created, err := c.Create(ctx, key, obj)
	require.NoError(t, err)
	if hasStatus && res == "pods" {
		var cur map[string]any
		require.NoError(t, json.Unmarshal(created.Raw(), &cur))
		cur["status"] = st
		_, err = c.UpdateStatus(ctx, key, cur)
		require.NoError(t, err)
	}
}

// pod is a Pod of app=db on the Node with ip, ready or not, with a container port named sql.
func pod(name, ip string, ready bool) string {
	r := "False"
	if ready {
		r = "True"
	}
	return `
apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: default, labels: {app: db}}
spec:
  nodeName: n1
  hostname: ` + name + `
  subdomain: db
  containers: [{name: c, image: postgres, ports: [{name: sql, containerPort: 5432}]}]
status:
  phase: Running
  podIP: ` + ip + `
  podIPs: [{ip: ` + ip + `}]
  conditions: [{type: Ready, status: "` + r + `"}]
`
}

// TestHeadlessService: a headless Service's Endpoints carry the headless label, hostnames of
// Pods whose subdomain is the Service, ready and not-ready addresses with the named port
// resolved; its EndpointSlice says the same with conditions; a Service without a selector
// gets nothing.
func TestHeadlessService(t *testing.T) {
	env := registrytest.New(t, registrytest.Options{})
	c := env.Registry.Client("test")
	ctrl, err := endpoints.New(endpoints.Config{Slices: env.Registry.Client(endpoints.SliceController), Endpoints: env.Registry.Client(endpoints.EndpointsController)})
	require.NoError(t, err)
	create(t, c, `{apiVersion: v1, kind: Node, metadata: {name: n1, labels: {topology.kubernetes.io/zone: z1}}}`)
	create(t, c, pod("db-0", "10.244.0.9", true))
	create(t, c, pod("db-1", "10.244.0.3", false))
	create(t, c, `
apiVersion: v1
kind: Service
metadata: {name: db, namespace: default}
spec:
  clusterIP: None
  selector: {app: db}
  ports: [{name: pg, port: 5432, targetPort: sql}]
`)
	create(t, c, `{apiVersion: v1, kind: Service, metadata: {name: manual, namespace: default}, spec: {ports: [{port: 80}]}}`)

	for _, name := range []string{"db", "manual"} {
		_, err := ctrl.Reconcile(ctx, cache.Key{Resource: "services", Namespace: "default", Name: name})
		require.NoError(t, err)
	}
	_, err = c.Get(ctx, cache.Key{Resource: "endpoints", Namespace: "default", Name: "manual"})
	require.ErrorIs(t, err, cache.ErrNotFound, "a Service without a selector is the user's")

	obj, err := c.Get(ctx, cache.Key{Resource: "endpoints", Namespace: "default", Name: "db"})
	require.NoError(t, err)
	var eps corev1.Endpoints
	require.NoError(t, json.Unmarshal(obj.Raw(), &eps))
	assert.Equal(t, map[string]string{"endpoints.kubernetes.io/managed-by": "endpoint-controller", corev1.IsHeadlessService: ""}, eps.Labels)
	require.Len(t, eps.Subsets, 1)
	s := eps.Subsets[0]
	assert.Equal(t, []corev1.EndpointPort{{Name: "pg", Port: 5432, Protocol: corev1.ProtocolTCP}}, s.Ports)
	require.Len(t, s.Addresses, 1)
	assert.Equal(t, "10.244.0.9", s.Addresses[0].IP)
	assert.Equal(t, "db-0", s.Addresses[0].Hostname, "the Pod's hostname: its subdomain is the Service")
	require.Len(t, s.NotReadyAddresses, 1)
	assert.Equal(t, "10.244.0.3", s.NotReadyAddresses[0].IP)

	l, err := c.List(ctx, cache.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, cache.InNamespace("default"))
	require.NoError(t, err)
	require.Len(t, l.Items, 1)
	var es discoveryv1.EndpointSlice
	require.NoError(t, json.Unmarshal(l.Items[0].Raw(), &es))
	assert.Equal(t, "db", es.Labels[discoveryv1.LabelServiceName])
	assert.Equal(t, endpoints.SliceController, es.Labels[discoveryv1.LabelManagedBy])
	assert.Contains(t, es.Labels, corev1.IsHeadlessService)
	require.Len(t, es.Endpoints, 2)
	byIP := map[string]discoveryv1.Endpoint{}
	for _, e := range es.Endpoints {
		byIP[e.Addresses[0]] = e
	}
	assert.True(t, *byIP["10.244.0.9"].Conditions.Ready)
	assert.False(t, *byIP["10.244.0.3"].Conditions.Ready)
	assert.Equal(t, "z1", *byIP["10.244.0.9"].Zone, "the Node's zone")

	// Deleted, the Service's Endpoints go (its slices are the collector's: owned).
	_, _, err = c.Delete(ctx, cache.Key{Resource: "services", Namespace: "default", Name: "db"}, cache.Preconditions{})
	require.NoError(t, err)
	_, err = ctrl.Reconcile(ctx, cache.Key{Resource: "services", Namespace: "default", Name: "db"})
	require.NoError(t, err)
	_, err = c.Get(ctx, cache.Key{Resource: "endpoints", Namespace: "default", Name: "db"})
	require.ErrorIs(t, err, cache.ErrNotFound)
	require.Len(t, es.OwnerReferences, 1)
	assert.Equal(t, "db", es.OwnerReferences[0].Name)
}
