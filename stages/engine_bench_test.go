package stages_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/opemu/opemu/stages"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// BenchmarkPodReady is the kubelet's part of a Pod's start: kwok's default stages matched
// against a bound Pending Pod and pod-ready played (rendered, patched through the write path),
// then matched again (nothing due). One op is one Pod.
func BenchmarkPodReady(b *testing.B) {
	r := newRig(b, defaults(b, stages.Delays{}))
	for i := 0; b.Loop(); i++ {
		name := fmt.Sprintf("p%d", i)
		b.StopTimer()
		r.pod(name, nil, "ReplicaSet")
		obj, err := r.client.Get(ctx, podKey(name))
		require.NoError(b, err)
		var pod corev1.Pod
		require.NoError(b, json.Unmarshal(obj.Raw(), &pod))
		b.StartTimer()
		if _, _, err := r.engine.PlayPod(ctx, obj, &pod); err != nil {
			b.Fatal(err)
		}
	}
}
