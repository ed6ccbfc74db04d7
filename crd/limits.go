package crd

import (
	"encoding/json"
	"fmt"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

// opemu bounds the CRDs it serves, which kube-apiserver does not: each keeps its compiled
// schemas in memory (about 9 times its size as JSON: a CRD of 56 KB keeps 0.5 MB), so a
// client creating CRDs without end would exhaust the process. A create beyond either bound is
// refused with the 403 kube-apiserver gives a create beyond a ResourceQuota.
const (
	// DefaultMaxCRDs is Config.MaxCRDs when unset: more than the largest operator suites
	// install (Crossplane's providers, about 900).
	DefaultMaxCRDs = 1000
	// DefaultMaxCRDBytes is Config.MaxCRDBytes when unset: 1,000 CRDs of 64 KB, which keep
	// about 600 MB.
	DefaultMaxCRDBytes = 64 << 20
)

// sizeOf is the size of c as JSON without its status, what the bound on the CRDs' total size
// counts (the status is small, and a CRD being created has none yet).
func sizeOf(c *apiextv1.CustomResourceDefinition) int64 {
	raw, err := json.Marshal(&apiextv1.CustomResourceDefinition{TypeMeta: c.TypeMeta, ObjectMeta: c.ObjectMeta, Spec: c.Spec})
	if err != nil {
		return 0
	}
	return int64(len(raw))
}

// checkBoundsLocked refuses c, of size bytes, when serving it would take the CRDs (built-in
// ones not counted) beyond MaxCRDs or MaxCRDBytes. Replacing a served CRD counts its new size
// instead of its old one.
func (r *Registry) checkBoundsLocked(c *apiextv1.CustomResourceDefinition, bytes int64) error {
	count, total := 1, bytes
	for name, e := range r.byName {
		if e.builtIn || name == c.Name {
			continue
		}
		count++
		total += e.bytes
	}
	gr := k8sschema.GroupResource{Group: Resource.Group, Resource: Resource.Resource}
	if count > r.maxCRDs() {
		return apierrors.NewForbidden(gr, c.Name, fmt.Errorf(
			"exceeded the server's bound on CRDs (MAX_CRDS): requested: customresourcedefinitions=1, used: customresourcedefinitions=%d, limited: customresourcedefinitions=%d", count-1, r.maxCRDs()))
	}
	if total > r.maxCRDBytes() {
		return apierrors.NewForbidden(gr, c.Name, fmt.Errorf(
			"exceeded the server's bound on the CRDs' total size (MAX_CRD_BYTES): requested: %d bytes, used: %d bytes, limited: %d bytes", bytes, total-bytes, r.maxCRDBytes()))
	}
	return nil
}

func (r *Registry) maxCRDs() int {
	if r.cfg.MaxCRDs > 0 {
		return r.cfg.MaxCRDs
	}
	return DefaultMaxCRDs
}

func (r *Registry) maxCRDBytes() int64 {
	if r.cfg.MaxCRDBytes > 0 {
		return r.cfg.MaxCRDBytes
	}
	return DefaultMaxCRDBytes
}
