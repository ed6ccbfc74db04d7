// Package workloads is the controllers of the workload kinds operators wait on (SPEC §14), as
// Reconcilers for package reconciler's Controller (the Application controller's queue,
// backoff, retries, leader gate, pause and step).
//
// Deployments and ReplicaSets are kube-controller-manager's controllers written again: a
// Deployment makes ReplicaSets (named and labelled with kube's pod-template-hash, with its
// revision annotations and history) and rolls them out within maxSurge and maxUnavailable; a
// ReplicaSet creates and deletes Pods owned by it (the garbage collector takes them with it);
// each counts its children in its status. StatefulSets (Pods by ordinal, ControllerRevisions,
// OrderedReady or Parallel, partitioned rolling updates), DaemonSets (a Pod per fitting Node)
// and Jobs (completions, parallelism, backoffLimit, Indexed mode, the job-tracking finalizer)
// are kube's controllers written again too, each making and deleting its Pods. Package nodes
// schedules and runs the Pods. FollowChildren is how a controller hears of its children's
// changes, DaemonSets.FollowNodes how the DaemonSet controller hears of the Nodes'.
//
// Each reconciler is level-based: every pass lists the object's children and does the next
// due step from them alone. All are safe for concurrent use.
package workloads
