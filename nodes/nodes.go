package nodes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"time"

	"github.com/opemu/opemu/cache"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
)

// Client is how the Nodes are written: the in-process API client (registry.Client), so what
// they store passes the write path's rules like a kubelet's writes.
type Client interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	Create(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	Update(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	UpdateStatus(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
}

// Manager is the field manager of the Nodes' writes, as a kubelet's.
const Manager = "kubelet"

// LeaseNamespace holds the Nodes' Leases.
const LeaseNamespace = "kube-node-lease"

// The kubelet's pace (its defaults): the Lease lasts 40 s and is renewed every quarter of it;
// the Node's status is reported every 5 minutes when nothing changed.
const (
	LeaseDuration  = 40 * time.Second
	RenewInterval  = LeaseDuration / 4
	ReportInterval = 5 * time.Minute
)

// KubeletAnnotation on a Node breaks its simulated kubelet, as a user of a real cluster would
// by stopping a kubelet or its container runtime: KubeletStopped stops it (no status, no Lease
// renewed, no Pod of the Node moved: the node lifecycle controller then finds the Node
// unreachable), KubeletNotReady keeps it beating but reporting Ready=False. Removing it (or
// any other value) starts the kubelet again.
const KubeletAnnotation = "nodes.opemu.dev/kubelet"

// The values of KubeletAnnotation.
const (
	KubeletStopped  = "Stopped"
	KubeletNotReady = "NotReady"
)

// KubeletVersion is the version the Nodes report: the Kubernetes whose API opemu serves.
const KubeletVersion = "v1.37.2"

// Config configures the Nodes. Client is required; zero values are documented defaults.
type Config struct {
	Client Client
	// Count is how many Nodes there are (Names). Zero means none.
	Count int
	// Capacity is each Node's capacity, and its allocatable. Nil means 8 CPUs, 32 GiB of
	// memory, 100 GiB of ephemeral storage, no huge pages and 110 pods (a kubelet's maxPods).
	Capacity corev1.ResourceList
	// Clock stamps the heartbeats and paces them. Nil means the real clock.
	Clock clock.WithTicker
	// Logger nil means slog.Default().
	Logger *slog.Logger
}

// Nodes registers the Nodes and heartbeats for them. Create it with New.
type Nodes struct {
	cfg   Config
	names []string
}

// New makes the Nodes of cfg.
func New(cfg Config) (*Nodes, error) {
	if cfg.Client == nil {
		return nil, errors.New("nodes: Client is required")
	}
	if cfg.Count < 0 {
		return nil, fmt.Errorf("nodes: Count %d is negative", cfg.Count)
	}
	if cfg.Capacity == nil {
		cfg.Capacity = corev1.ResourceList{
			corev1.ResourceCPU:              resource.MustParse("8"),
			corev1.ResourceMemory:           resource.MustParse("32Gi"),
			corev1.ResourceEphemeralStorage: resource.MustParse("100Gi"),
			"hugepages-1Gi":                 resource.MustParse("0"),
			"hugepages-2Mi":                 resource.MustParse("0"),
			corev1.ResourcePods:             resource.MustParse("110"),
		}
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Nodes{cfg: cfg, names: Names(cfg.Count)}, nil
}

// Names are the names of count Nodes, as kind names a cluster's nodes: opemu-control-plane,
// then opemu-worker, opemu-worker2, opemu-worker3, ...
func Names(count int) []string {
	out := make([]string, 0, count)
	for i := range count {
		switch i {
		case 0:
			out = append(out, "opemu-control-plane")
		case 1:
			out = append(out, "opemu-worker")
		default:
			out = append(out, "opemu-worker"+strconv.Itoa(i))
		}
	}
	return out
}

// Names are the names of these Nodes.
func (n *Nodes) Names() []string { return n.names }

func nodeKey(name string) cache.Key { return cache.Key{Resource: "nodes", Name: name} }

func leaseKey(name string) cache.Key {
	return cache.Key{Group: "coordination.k8s.io", Resource: "leases", Namespace: LeaseNamespace, Name: name}
}

// node is the i-th Node as its kubelet registers it, its conditions reported at now.
func (n *Nodes) node(i int, now metav1.Time) *corev1.Node {
	name := n.names[i]
	labels := map[string]string{
		"beta.kubernetes.io/arch": runtime.GOARCH, "beta.kubernetes.io/os": "linux",
		corev1.LabelArchStable: runtime.GOARCH, corev1.LabelOSStable: "linux", corev1.LabelHostname: name,
	}
	var taints []corev1.Taint
	if i == 0 {
		labels["node-role.kubernetes.io/control-plane"] = ""
		labels[corev1.LabelNodeExcludeBalancers] = ""
		if len(n.names) > 1 {
			taints = []corev1.Taint{{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule}}
		}
	}
	cidr := fmt.Sprintf("10.244.%d.0/24", i)
	return &corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{
			"node.alpha.kubernetes.io/ttl":                           "0",
			"volumes.kubernetes.io/controller-managed-attach-detach": "true",
		}},
		Spec: corev1.NodeSpec{PodCIDR: cidr, PodCIDRs: []string{cidr}, Taints: taints},
		Status: corev1.NodeStatus{
			Capacity:    n.cfg.Capacity.DeepCopy(),
			Allocatable: n.cfg.Capacity.DeepCopy(),
			Conditions:  conditions(now, true),
			Addresses: []corev1.NodeAddress{
				{Type: corev1.NodeInternalIP, Address: nodeIP(i)},
				{Type: corev1.NodeHostName, Address: name},
			},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: 10250}},
			NodeInfo: corev1.NodeSystemInfo{
				Architecture: runtime.GOARCH, OperatingSystem: "linux", KubeletVersion: KubeletVersion, OSImage: "opemu simulated node",
			},
		},
	}
}

// conditions are what a kubelet reports, heartbeat and transition at now: healthy, or (ready
// false) with its container runtime down, as a kubelet words it.
func conditions(now metav1.Time, ready bool) []corev1.NodeCondition {
	c := func(typ corev1.NodeConditionType, status corev1.ConditionStatus, reason, message string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: status, Reason: reason, Message: message, LastHeartbeatTime: now, LastTransitionTime: now}
	}
	readyCondition := c(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "kubelet is posting ready status")
	if !ready {
		readyCondition = c(corev1.NodeReady, corev1.ConditionFalse, "KubeletNotReady", "container runtime is down")
	}
	return []corev1.NodeCondition{
		c(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
		c(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
		c(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
		readyCondition,
	}
}

// lease is the Lease of the Node name (uid: its owner's), renewed at now.
func lease(name, uid string, now time.Time) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		TypeMeta: metav1.TypeMeta{APIVersion: "coordination.k8s.io/v1", Kind: "Lease"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: LeaseNamespace, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "Node", Name: name, UID: types.UID(uid)},
		}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(name),
			LeaseDurationSeconds: ptr.To(int32(LeaseDuration / time.Second)),
			RenewTime:            ptr.To(metav1.NewMicroTime(now)),
		},
	}
}

// toMap turns a typed object into the decoded JSON the client writes.
func toMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return cache.DecodeJSON(raw)
}

// decode reads a stored object into its Go type.
func decode(obj *cache.Object, into any) error { return json.Unmarshal(obj.Raw(), into) }
