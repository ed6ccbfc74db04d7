package workloads

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/dump"
)

// PodTemplateHash is the pod-template-hash of a pod template and a Deployment's
// status.collisionCount, as kube-controller-manager computes it (controller.ComputeHash): an
// FNV-32a hash of the template as k8s.io/utils/dump.ForHash prints it (pkg/util/hash's
// DeepHashObject), then the collision count's 8 little-endian bytes when there is one, its
// decimal form encoded with rand.SafeEncodeString. The template is the Deployment's as stored
// (defaulted), so the same Deployment gets the same ReplicaSet name as on a cluster.
func PodTemplateHash(template *corev1.PodTemplateSpec, collisionCount *int32) string {
	h := fnv.New32a()
	fmt.Fprintf(h, "%v", dump.ForHash(*template))
	if collisionCount != nil {
		b := make([]byte, 8)
		binary.LittleEndian.PutUint32(b, uint32(*collisionCount))
		_, _ = h.Write(b)
	}
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}
