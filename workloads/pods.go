package workloads

import (
	"context"
	"errors"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/reconciler"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podFromTemplate is the Pod a controller makes from template, as kube's GetPodFromTemplate
// makes it: the template's labels, annotations, finalizers and spec (copied), owned by ref.
// name is its name, or generateName when it ends in "-".
func podFromTemplate(t *corev1.PodTemplateSpec, namespace, name string, ref metav1.OwnerReference) *corev1.Pod {
	t = t.DeepCopy()
	pod := &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace, Labels: t.Labels, Annotations: t.Annotations, Finalizers: t.Finalizers,
			OwnerReferences: []metav1.OwnerReference{ref},
		},
		Spec: t.Spec,
	}
	if name != "" && name[len(name)-1] == '-' {
		pod.GenerateName = name
	} else {
		pod.Name = name
	}
	return pod
}

// createPod creates pod and returns it as stored.
func createPod(ctx context.Context, c Client, pod *corev1.Pod) (*corev1.Pod, error) {
	body, err := toMap(pod)
	if err != nil {
		return nil, reconciler.TerminalError(err)
	}
	created, err := c.Create(ctx, cache.Key{Resource: PodResource.Resource, Namespace: pod.Namespace, Name: pod.Name}, body)
	if err != nil {
		return nil, err
	}
	return decodePod(created)
}

// deletePod deletes p (gracefully: its kubelet removes it), conditional on its uid; a Pod
// already gone is no error.
func deletePod(ctx context.Context, c Client, p *corev1.Pod) error {
	key := cache.Key{Resource: PodResource.Resource, Namespace: p.Namespace, Name: p.Name}
	if _, _, err := c.Delete(ctx, key, cache.Preconditions{UID: string(p.UID)}); err != nil && !errors.Is(err, cache.ErrNotFound) {
		return err
	}
	return nil
}

// podRunningAndReady: Running with the Ready condition (kube's podutil.IsPodReady on a
// running Pod).
func podRunningAndReady(p *corev1.Pod) bool {
	c := podReadyCondition(p)
	return p.Status.Phase == corev1.PodRunning && c != nil && c.Status == corev1.ConditionTrue
}

// podAvailable is how long until p, Ready, is available with minReadySeconds at now (zero:
// it is), and whether it is Ready at all.
func podAvailable(p *corev1.Pod, minReadySeconds int32, now time.Time) (wait time.Duration, ready bool) {
	c := podReadyCondition(p)
	if c == nil || c.Status != corev1.ConditionTrue {
		return 0, false
	}
	return available(c, minReadySeconds, now), true
}

// podFinished: Succeeded or Failed.
func podFinished(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// sooner is the shorter of two waits, zero meaning none.
func sooner(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}
