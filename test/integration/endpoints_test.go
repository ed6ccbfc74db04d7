package integration

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// TestEndpointsFromReadyPods: a Service's selector gets Endpoints and an EndpointSlice in kube's
// shapes from the Pods it selects, its named targetPort resolved on each Pod; a Pod a Stage
// makes unready moves to notReadyAddresses and its endpoint's ready condition turns false.
func TestEndpointsFromReadyPods(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_LEADER_ELECTION=false", "ROLLOUT_STEP=0")
	k := p.kubectl(t)

	// A Stage (kwok's YAML) that makes Pods labelled canary=true Running but not Ready.
	k.Apply(`
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: canary-unready
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchLabels: {canary: "true"}
    matchExpressions:
    - {key: '.status.phase', operator: In, values: [Running]}
    - {key: '.status.conditions.[] | select( .type == "Ready" ) | .status', operator: In, values: ["True"]}
  next:
    statusTemplate: |
      conditions:
      - type: Ready
        status: "False"
        reason: ReadinessProbeFailed
        lastTransitionTime: {{ Now | Quote }}
      - type: ContainersReady
        status: "False"
        lastTransitionTime: {{ Now | Quote }}
`)
	k.Apply(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: nginx
        image: nginx
        ports: [{name: http, containerPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata: {name: canary, labels: {app: web, canary: "true"}}
spec:
  containers:
  - name: nginx
    image: nginx
    ports: [{name: http, containerPort: 9090}]
---
apiVersion: v1
kind: Service
metadata: {name: web, labels: {tier: front}}
spec:
  selector: {app: web}
  ports: [{name: web, port: 80, targetPort: http}]
`)
	assert.Contains(t, k.Run("rollout", "status", "deployment/web", "--timeout=30s"), "successfully rolled out")

	// getEndpoints reads the Endpoints from kubectl's standard output (its standard error has
	// kube's deprecation warning of v1 Endpoints).
	var eps corev1.Endpoints
	getEndpoints := func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := k.Cmd(ctx, "get", "endpoints", "web", "-o", "json").Output()
		eps = corev1.Endpoints{}
		return err == nil && json.Unmarshal(out, &eps) == nil
	}
	require.Eventually(t, func() bool {
		return getEndpoints() && len(eps.Subsets) == 2 && len(eps.Subsets[0].Addresses)+len(eps.Subsets[1].Addresses) == 2 &&
			len(eps.Subsets[0].NotReadyAddresses)+len(eps.Subsets[1].NotReadyAddresses) == 1
	}, 30*time.Second, 100*time.Millisecond, "two ready addresses on 8080, the canary not ready on 9090: %+v", eps.Subsets)
	assert.Equal(t, "endpoint-controller", eps.Labels["endpoints.kubernetes.io/managed-by"])
	assert.Equal(t, "front", eps.Labels["tier"], "the Service's labels")
	assert.NotEmpty(t, eps.Annotations[corev1.EndpointsLastChangeTriggerTime])
	for _, s := range eps.Subsets {
		require.Len(t, s.Ports, 1)
		assert.Equal(t, "web", s.Ports[0].Name)
		assert.Equal(t, corev1.ProtocolTCP, s.Ports[0].Protocol)
		switch {
		case len(s.Addresses) == 2:
			assert.EqualValues(t, 8080, s.Ports[0].Port, "targetPort http resolved on the Deployment's Pods")
			for _, a := range s.Addresses {
				assert.Regexp(t, `^10\.244\.0\.\d+$`, a.IP)
				assert.Equal(t, "opemu-control-plane", *a.NodeName)
				assert.Equal(t, "Pod", a.TargetRef.Kind)
				assert.NotEmpty(t, a.TargetRef.UID)
			}
		default:
			assert.EqualValues(t, 9090, s.Ports[0].Port, "and on the canary")
			require.Len(t, s.NotReadyAddresses, 1)
			assert.Equal(t, "canary", s.NotReadyAddresses[0].TargetRef.Name)
		}
	}

	var list discoveryv1.EndpointSliceList
	require.NoError(t, json.Unmarshal([]byte(k.Run("get", "endpointslices", "-l", "kubernetes.io/service-name=web", "-o", "json")), &list))
	require.Len(t, list.Items, 2, "one slice per port mapping, as kube's reconciler makes them")
	ready, unready := 0, 0
	for _, s := range list.Items {
		assert.Equal(t, "endpointslice-controller.k8s.io", s.Labels["endpointslice.kubernetes.io/managed-by"])
		assert.Equal(t, "front", s.Labels["tier"])
		assert.Equal(t, discoveryv1.AddressTypeIPv4, s.AddressType)
		assert.Regexp(t, `^web-[a-z0-9]{5}$`, s.Name)
		require.Len(t, s.OwnerReferences, 1)
		assert.Equal(t, "Service", s.OwnerReferences[0].Kind)
		require.Len(t, s.Ports, 1)
		for _, e := range s.Endpoints {
			assert.False(t, *e.Conditions.Terminating)
			if *e.Conditions.Ready {
				ready++
				assert.EqualValues(t, 8080, *s.Ports[0].Port)
			} else {
				unready++
				assert.False(t, *e.Conditions.Serving)
				assert.EqualValues(t, 9090, *s.Ports[0].Port)
			}
			assert.Equal(t, "opemu-control-plane", *e.NodeName)
		}
	}
	assert.Equal(t, [2]int{2, 1}, [2]int{ready, unready})

	// Scaled to 3, the Endpoints follow; deleted, the Service's Endpoints and slices go.
	k.Run("scale", "deployment/web", "--replicas=3")
	require.Eventually(t, func() bool {
		if !getEndpoints() {
			return false
		}
		n := 0
		for _, s := range eps.Subsets {
			n += len(s.Addresses)
		}
		return n == 3
	}, 30*time.Second, 100*time.Millisecond)
	k.Run("delete", "service", "web")
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, err := k.Cmd(ctx, "get", "endpoints,endpointslices", "-l", "tier=front", "-o", "name").Output()
		return err == nil && len(out) == 0
	}, 30*time.Second, 100*time.Millisecond, "the Endpoints deleted, the slices collected")
}
