package stages

import (
	"fmt"
	"time"

	"github.com/opemu/opemu/cache"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"
	kwokcrd "sigs.k8s.io/kwok/kustomize/crd"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/apis/v1alpha1"
	"sigs.k8s.io/yaml"
)

// CRDName is the name of kwok's Stage CRD.
const CRDName = "stages.kwok.x-k8s.io"

// Resource is where Stages are stored (cluster-scoped).
var Resource = cache.GroupResource{Group: "kwok.x-k8s.io", Resource: "stages"}

// CRD is kwok's own Stage CRD (the one kwok installs), decoded.
func CRD() (*apiextv1.CustomResourceDefinition, error) {
	var c apiextv1.CustomResourceDefinition
	if err := yaml.Unmarshal(kwokcrd.Stage, &c); err != nil {
		return nil, fmt.Errorf("stages: kwok's Stage CRD: %w", err)
	}
	return &c, nil
}

// Delays are the delays opemu gives kwok's default stages (zero: none, as kwok's "fast" set).
type Delays struct {
	// Ready is pod-ready's: how long a bound Pod takes to run and be Ready.
	Ready time.Duration
	// Complete is pod-complete's: how long a Job's Pod runs before it succeeds.
	Complete time.Duration
}

// Defaults are kwok's default Pod stages (kustomize/stage/pod/fast: pod-ready, pod-complete
// for Pods a Job owns, pod-delete), with d's delays on pod-ready and pod-complete.
func Defaults(d Delays) ([]*v1alpha1.Stage, error) {
	var out []*v1alpha1.Stage
	for _, src := range []struct {
		yaml  string
		delay time.Duration
	}{{podfast.DefaultPodReady, d.Ready}, {podfast.DefaultPodComplete, d.Complete}, {podfast.DefaultPodDelete, 0}} {
		var s v1alpha1.Stage
		if err := yaml.UnmarshalStrict([]byte(src.yaml), &s); err != nil {
			return nil, fmt.Errorf("stages: kwok's default stage: %w", err)
		}
		if src.delay > 0 {
			s.Spec.Delay = &v1alpha1.StageDelay{DurationMilliseconds: ptr.To(src.delay.Milliseconds())}
		}
		out = append(out, &s)
	}
	return out, nil
}
