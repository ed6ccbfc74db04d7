// Package workloads is the controllers of the workload kinds operators wait on (SPEC §14), as
// Reconcilers for package reconciler's Controller (the Application controller's queue,
// backoff, retries, leader gate, pause and step).
//
// Deployments and ReplicaSets are kube-controller-manager's controllers written again: a
// Deployment makes ReplicaSets (named and labelled with kube's pod-template-hash, with its
// revision annotations and history) and rolls them out within maxSurge and maxUnavailable; a
// ReplicaSet creates and deletes Pods owned by it (the garbage collector takes them with it);
// each counts its children in its status. Package nodes schedules and runs the Pods.
// FollowChildren is how a controller hears of its children's changes.
//
// StatefulSets and Jobs are still simulated in status only: a StatefulSet is rolled out one
// step per RolloutStep (its status counts and revisions), a Job completes after JobDuration
// per wave of parallelism pods (succeeded, startTime, completionTime, the SuccessCriteriaMet
// and Complete conditions); neither makes a Pod.
//
// Each reconciler is level-based (every pass reads the object and does the next due step); the
// simulated ones keep only when the next step of each object is due. All are safe for
// concurrent use.
package workloads
