package workloads_test

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/opemu/opemu/workloads"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
)

// TestPodTemplateHash: the hash of the Deployment `kubectl create deployment web
// --image=nginx --replicas=3` makes, as kube-apiserver v1.37.2 stored it (testdata), is the
// one kube-controller-manager's own code computes for it: 5fc9f4bf66, recorded by running
// k8s.io/kubernetes v1.37.2's pkg/util/hash.DeepHashObject (controller.ComputeHash's) on it.
func TestPodTemplateHash(t *testing.T) {
	raw, err := os.ReadFile("testdata/web-deployment.json")
	require.NoError(t, err)
	var d appsv1.Deployment
	require.NoError(t, json.Unmarshal(raw, &d))
	assert.Equal(t, "5fc9f4bf66", workloads.PodTemplateHash(&d.Spec.Template, nil))
	assert.NotEqual(t, workloads.PodTemplateHash(&d.Spec.Template, ptr.To[int32](1)), workloads.PodTemplateHash(&d.Spec.Template, nil), "the collision count moves it")
	d.Spec.Template.Spec.Containers[0].Image = "nginx:1.28"
	assert.NotEqual(t, "5fc9f4bf66", workloads.PodTemplateHash(&d.Spec.Template, nil))
}
