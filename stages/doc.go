// Package stages is kwok's Stage API (kwok.x-k8s.io/v1alpha1 Stage) played on opemu's clock:
// the Stage kind (kwok's own CRD, cluster-scoped), kwok's default Pod stages, and the Engine
// that moves a Pod through the Stages stored in the API, as kwok's pod controller does.
//
// The Engine is kwok's lifecycle engine (sigs.k8s.io/kwok/pkg/utils/lifecycle), fed with the
// Stage objects converted as kwok converts them (next.statusTemplate, finalizers, delete and
// event become steps; a matchExpression's key becomes a jq requirement): selectors
// (matchLabels, matchAnnotations, matchExpressions with jq keys or CEL), weights and weightFrom,
// delays with jitter and their From variants, and the steps (patches of the object or its
// status, finalizers added or removed, delete, an Event). Its templates are kwok's Go
// templates (sprig's functions, Quote, YAML, NodeConditions) with Now and StartTime on the
// injected clock and the IP functions of the caller (Config.Funcs: the Nodes' kubelets).
//
// What a kwok user does works the same: Stages are objects, so `kubectl apply -f` of kwok's
// YAML adds or replaces one and `kubectl delete stage` removes it; the Engine hears of every
// change (Follow) and the next pass over a Pod matches against the Stages then stored. A delay
// is counted from the pass that matched the Pod at its current resourceVersion: a change to the
// Pod matches it again, as kwok matches every update it is told of.
package stages
