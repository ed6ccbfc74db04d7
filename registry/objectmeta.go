package registry

import (
	"encoding/json"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// objectMetaOf decodes a JSON object's metadata into ObjectMeta, as Kubernetes does before
// validating it: through a JSON round trip, which also gives its errors, unless the common
// shape is read directly (simpleObjectMeta, objectmeta_fast.go).
func objectMetaOf(md map[string]any) (metav1.ObjectMeta, error) {
	if meta, ok := simpleObjectMeta(md); ok {
		return meta, nil
	}
	var meta metav1.ObjectMeta
	raw, err := json.Marshal(md)
	if err != nil {
		return meta, err
	}
	err = json.Unmarshal(raw, &meta)
	return meta, err
}
