package kinds

import (
	"encoding/json"
	"errors"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// Protobuf request bodies (client-go sends them for built-in kinds; kubectl for `create
// namespace`), decoded with client-go's scheme, and the Go values protobuf answers are encoded
// from. The binary links that scheme anyway (client-go's
// typed clients, which the lease lock uses, register it when the process starts), so decoding
// with it costs no memory beyond what is already paid; a local scheme of the served groups would
// be a second copy. A body of a kind that is not served decodes, and is then refused by the
// write path because its apiVersion and kind do not match the URL's.

// ErrProtobuf wraps every failure to decode a protobuf body.
var ErrProtobuf = errors.New("kinds: not a protobuf object this server knows")

// DecodeProtobuf decodes a protobuf body (an object of a built-in kind, a Scale, a review, or
// DeleteOptions) into its JSON encoding and says what it is.
func (r *Registry) DecodeProtobuf(body []byte) ([]byte, schema.GroupVersionKind, error) {
	obj, gvk, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
	if err != nil {
		return nil, schema.GroupVersionKind{}, errors.Join(ErrProtobuf, err)
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, schema.GroupVersionKind{}, errors.Join(ErrProtobuf, err)
	}
	return raw, *gvk, nil
}

// Typed decodes the JSON of a built-in object, or of a list of them, into its Go value (the
// form its protobuf answer is encoded from), as its apiVersion and kind name it.
func (r *Registry) Typed(data []byte) (runtime.Object, error) {
	obj, _, err := clientgoscheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	return obj, err
}
