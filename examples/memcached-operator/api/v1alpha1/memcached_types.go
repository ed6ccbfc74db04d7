package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// What the defaulting webhook sets when a Memcached leaves them out (the controller assumes
// the same when it runs without its webhooks).
const (
	DefaultSize          int32 = 1
	DefaultContainerPort int32 = 11211
)

// MemcachedSpec is the desired state of a Memcached: how many instances, on which port.
type MemcachedSpec struct {
	// Size is the number of Memcached instances (the Deployment's replicas). The defaulting
	// webhook sets 1 when it is left out.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3
	// +optional
	Size *int32 `json:"size,omitempty"`

	// ContainerPort is the port Memcached listens on. The defaulting webhook sets 11211 when
	// it is left out; the validating webhook refuses a privileged port (memcached runs as a
	// non-root user) and a change once set.
	// +optional
	ContainerPort int32 `json:"containerPort,omitempty"`
}

// MemcachedStatus is the observed state of a Memcached.
type MemcachedStatus struct {
	// Conditions are Available, Progressing and Degraded, as the kubebuilder book's operator
	// reports them.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty" patchStrategy:"merge" patchMergeKey:"type"`
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Size",type=integer,JSONPath=`.spec.size`
// +kubebuilder:printcolumn:name="Available",type=string,JSONPath=`.status.conditions[?(@.type=="Available")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Memcached is a Memcached cache run by the operator as a Deployment.
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MemcachedSpec   `json:"spec,omitempty"`
	Status MemcachedStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// MemcachedList is a list of Memcached.
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Memcached `json:"items"`
}
