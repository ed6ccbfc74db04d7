package kinds

import (
	"encoding/json"
	"errors"
	"sync"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
)

// Protobuf request bodies (client-go sends them for built-in kinds; kubectl for `create
// namespace`), decoded with a scheme of only the Go types of the kinds served: the whole
// client-go scheme would cost several MiB of idle memory. Each Registry builds its decoder on
// first use.

// ErrProtobuf wraps every failure to decode a protobuf body.
var ErrProtobuf = errors.New("kinds: not a protobuf object this server knows")

type protobufCodec struct {
	once    sync.Once
	decoder runtime.Decoder
}

func (p *protobufCodec) get() runtime.Decoder {
	p.once.Do(func() {
		scheme := runtime.NewScheme()
		// The reviews (authorization and authentication) are not stored kinds, but clients send
		// them as protobuf too (kubectl auth can-i).
		for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, coordinationv1.AddToScheme, authorizationv1.AddToScheme, authenticationv1.AddToScheme} {
			if err := add(scheme); err != nil {
				panic(err) // registering the client-go types cannot fail
			}
		}
		metav1.AddToGroupVersion(scheme, metav1.SchemeGroupVersion)
		p.decoder = serializer.NewCodecFactory(scheme).UniversalDeserializer()
	})
	return p.decoder
}

// DecodeProtobuf decodes a protobuf body (an object of a built-in kind, a review, or
// DeleteOptions) into its JSON encoding and says what it is.
func (r *Registry) DecodeProtobuf(body []byte) ([]byte, schema.GroupVersionKind, error) {
	obj, gvk, err := r.proto.get().Decode(body, nil, nil)
	if err != nil {
		return nil, schema.GroupVersionKind{}, errors.Join(ErrProtobuf, err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, schema.GroupVersionKind{}, errors.Join(ErrProtobuf, err)
	}
	return raw, *gvk, nil
}
