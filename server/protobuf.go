package server

import (
	"encoding/json"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// Protobuf request bodies (client-go v0.32+ sends them for Lease, Event and Namespace; kubectl
// for `create namespace`). Decoded with a local scheme of only the built-in kinds served: the
// whole client-go scheme would cost several MiB of idle memory. Answers stay JSON.

const protobufType = "application/vnd.kubernetes.protobuf"

var protoDecoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme} {
		if err := add(scheme); err != nil {
			panic(err)
		}
	}
	metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
	return serializer.NewCodecFactory(scheme).UniversalDeserializer()
}()

// decodeProtobuf decodes a protobuf body into the JSON object it stands for.
func decodeProtobuf(body []byte) (map[string]any, error) {
	obj, gvk, err := protoDecoder.Decode(body, nil, nil)
	if err != nil {
		return nil, badRequest("the body of the request is not a protobuf object this server knows: %v", err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	m, err := decodeJSONObject(raw)
	if err != nil {
		return nil, err
	}
	m["apiVersion"], m["kind"] = gvk.GroupVersion().String(), gvk.Kind
	return m, nil
}
