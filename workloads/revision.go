package workloads

import (
	"encoding/json"
	"fmt"
	"hash/fnv"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
)

// revisionPatch is what a StatefulSet's or DaemonSet's ControllerRevision of template holds,
// as their kube controllers write it (getPatch): {"spec":{"template":<the template,
// "$patch":"replace">}}, the template as encoding/json writes the Go type, its keys then sorted.
func revisionPatch(t *corev1.PodTemplateSpec) ([]byte, error) {
	raw, err := json.Marshal(t)
	if err != nil {
		return nil, err
	}
	var template map[string]any
	if err := json.Unmarshal(raw, &template); err != nil {
		return nil, err
	}
	template["$patch"] = "replace"
	return json.Marshal(map[string]any{"spec": map[string]any{"template": template}})
}

// revisionHash is kube's HashControllerRevision of a revision holding raw: FNV-32 of raw and
// the collision count's decimal form, encoded with rand.SafeEncodeString.
func revisionHash(raw []byte, collisions int32) string {
	h := fnv.New32()
	_, _ = h.Write(raw)
	_, _ = h.Write([]byte(strconv.FormatInt(int64(collisions), 10)))
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// revisionName is kube's ControllerRevisionName: <owner>-<hash>, the owner's name cut to 223
// characters.
func revisionName(owner, hash string) string {
	if len(owner) > 223 {
		owner = owner[:223]
	}
	return owner + "-" + hash
}

// canonical is raw decoded, for comparing revisions' data whatever their keys' order and
// spacing as stored.
func canonical(raw []byte) any {
	var v any
	_ = json.Unmarshal(raw, &v)
	return v
}

func runtimeRaw(raw []byte) runtime.RawExtension { return runtime.RawExtension{Raw: raw} }

// revisionTemplate is the pod template a revision holds.
func revisionTemplate(rev *appsv1.ControllerRevision) (*corev1.PodTemplateSpec, error) {
	var patch struct {
		Spec struct {
			Template corev1.PodTemplateSpec `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(rev.Data.Raw, &patch); err != nil {
		return nil, fmt.Errorf("workloads: revision %s: %w", rev.Name, err)
	}
	return &patch.Spec.Template, nil
}

// sameRevision: a and b hold the same data, whatever their keys' order and spacing as
// stored.
func sameRevision(a, b []byte) bool { return equalJSON(canonical(a), canonical(b)) }
