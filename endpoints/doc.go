// Package endpoints is kube-controller-manager's endpointslice and endpoint controllers,
// simulated as one Reconciler over Services: a Service with a selector gets the EndpointSlices
// kube's EndpointSlice reconciler writes (k8s.io/endpointslice, the staging library
// kube-controller-manager runs: kubernetes.io/service-name and
// endpointslice.kubernetes.io/managed-by labels, ready/serving/terminating conditions, ports
// resolved from each Pod's targetPort, named ports included, the Service as controller owner)
// and the v1 Endpoints kube's endpoint controller writes (addresses and notReadyAddresses, the
// endpoints.kubernetes.io/managed-by label, subsets grouped by their ports). A Pod's change
// enqueues the Services of its namespace (FollowPods). A Service without a selector is the
// user's to describe, as in kube.
package endpoints
