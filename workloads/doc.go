// Package workloads simulates the controllers of the workload kinds operators wait on (SPEC
// §14), as Reconcilers for package reconciler's Controller (the Application controller's queue,
// backoff, retries, leader gate, pause and step): Deployments and StatefulSets are rolled out
// one step per RolloutStep like Applications (their status counts, observedGeneration, and for
// Deployments the Available and Progressing conditions with kube-controller-manager's reasons),
// and Jobs complete after JobDuration per wave of parallelism pods (succeeded, startTime,
// completionTime, the SuccessCriteriaMet and Complete conditions).
//
// Nothing else of a cluster is simulated: no ReplicaSet or Pod is created (the rollout is
// status only, kwok's territory is the rest), and the reconcilers write only status, through
// the status subresource, never an object's metadata or spec: an operator that rebuilds its
// Deployment on every pass compares equal and does not loop.
//
// Each reconciler is level-based (every pass reads the object and does the next due step) and
// keeps only when the next step of each object is due; it is safe for concurrent use.
package workloads
