package workloads

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestRevisionName: a StatefulSet "test" with this (defaulted) template has its
// ControllerRevision named test-776999688b by kube-controller-manager v1.34 and later (the
// revision kube's pkg/controller/statefulset compatibility data records for this template);
// the patch it holds replaces the template, its keys sorted.
func TestRevisionName(t *testing.T) {
	template := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "foo"}, Annotations: map[string]string{"test": "value"}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "test", Image: "test", ImagePullPolicy: corev1.PullAlways,
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile}},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, SchedulerName: "default-scheduler",
			SecurityContext: &corev1.PodSecurityContext{}, TerminationGracePeriodSeconds: ptr.To[int64](30),
		},
	}
	raw, err := revisionPatch(template)
	require.NoError(t, err)
	assert.Equal(t, "test-776999688b", revisionName("test", revisionHash(raw, 0)))
	assert.Regexp(t, `^\{"spec":\{"template":\{"\$patch":"replace","metadata":\{"annotations":\{"test":"value"\},"labels":\{"app":"foo"\}\},"spec":\{"containers":`, string(raw))
	assert.NotEqual(t, "test-776999688b", revisionName("test", revisionHash(raw, 1)), "a collision moves it")

	rev, err := revisionTemplate(&appsv1.ControllerRevision{Data: runtimeRaw(raw)})
	require.NoError(t, err)
	assert.Equal(t, template, rev, "the revision gives the template back")
}
