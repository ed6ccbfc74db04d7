// Package v1alpha1 is the Memcached API, cache.example.com/v1alpha1, as kubebuilder scaffolds
// it (`kubebuilder create api --group cache --version v1alpha1 --kind Memcached`).
//
// +kubebuilder:object:generate=true
// +groupName=cache.example.com
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of this API.
	GroupVersion = schema.GroupVersion{Group: "cache.example.com", Version: "v1alpha1"}

	// SchemeBuilder adds the Memcached kinds to a scheme. (kubebuilder registers them from an
	// init function; registering them here keeps the package free of one.)
	SchemeBuilder = (&scheme.Builder{GroupVersion: GroupVersion}).Register(&Memcached{}, &MemcachedList{})

	// AddToScheme adds the kinds of this group and version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
