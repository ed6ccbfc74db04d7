// Package nodes is the cluster's Nodes (SPEC §22): a configurable number of fake Nodes that
// register as kind's do, become Ready, and heartbeat as a kubelet does, on opemu's clock; and
// Pods, the Reconciler that schedules Pods onto them as kube-scheduler's default filters would
// and runs them through kwok's Stages (package stages: the Stages stored in the API, kwok's
// default pod-ready, pod-complete and pod-delete unless replaced); and Lifecycle, kube's node
// lifecycle controller with its taint eviction and the pod GC of deleted Nodes. A Node's
// kubelet is stopped or made not ready by its KubeletAnnotation, as a user would stop a real
// one: its Pods then follow as on a cluster.
//
// Names and labels are kind's, with opemu as the cluster's name: kind names the nodes of a
// cluster <cluster>-control-plane, <cluster>-worker, <cluster>-worker2, ..., so the Nodes are
// opemu-control-plane, opemu-worker, opemu-worker2, ... (what `kind create cluster --name
// opemu` makes), labelled with kubernetes.io/hostname, os and arch (and their beta. forms), and
// the control plane with node-role.kubernetes.io/control-plane and
// node.kubernetes.io/exclude-from-external-load-balancers. As in kind, the control plane is
// tainted node-role.kubernetes.io/control-plane:NoSchedule only when there are workers.
//
// Register creates the Nodes that are missing: each as a kubelet registers it (its status,
// Ready, in the create; the write path adds the node.kubernetes.io/not-ready taint, as
// kube-apiserver's TaintNodesByCondition admission does), then without that taint (the node
// lifecycle controller's part once the Node is Ready), then its Lease in kube-node-lease. Run is
// the kubelets' heartbeat: every 10 s each Node's Lease is renewed (renewTime, duration 40 s,
// owned by the Node), and the Node's status is written when its conditions are not what the
// kubelet reports or when it last reported 5 minutes ago (lastHeartbeatTime), as a kubelet's
// nodeStatusReportFrequency has it (a kubelet stopped beats no more; one not ready reports
// Ready=False, KubeletNotReady). A Node someone deleted is not brought back until the next
// Register (a kubelet registers when it starts).
package nodes
