package server

import (
	"bytes"
	"encoding/json"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/internal/jsonfast"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"sigs.k8s.io/yaml"
)

// Answers in the negotiated media type (negotiate.go). JSON is the stored bytes, sent as they
// are; YAML is converted from that JSON as kube-apiserver's YAML serializer converts its own
// (sigs.k8s.io/yaml); protobuf is encoded from the answer's Go value by apimachinery's protobuf
// serializer, the Go value decoded from the JSON (kinds.Registry.Typed for built-in kinds,
// metav1's types for metadata and Status).

// protobufSerializer encodes answers (its scheme is only for decoding, which it never does).
var protobufSerializer = protobuf.NewSerializer(nil, nil)

// typedFunc decodes an answer's JSON into the Go value its protobuf form is encoded from.
type typedFunc func(data []byte) (runtime.Object, error)

// typedAs returns a typedFunc decoding into a new value of into's type each time.
func typedAs[T any, P interface {
	*T
	runtime.Object
}]() typedFunc {
	return func(data []byte) (runtime.Object, error) {
		v := P(new(T))
		return v, json.Unmarshal(data, v)
	}
}

// encodeAs returns body (JSON) in mediaType, and that media type as Content-Type says it.
func encodeAs(mediaType string, body []byte, typed typedFunc) ([]byte, string, error) {
	switch mediaType {
	case yamlType:
		y, err := yaml.JSONToYAML(body)
		return y, yamlType, err
	case protobufType:
		obj, err := typed(body)
		if err != nil {
			return nil, "", err
		}
		var buf bytes.Buffer
		if err := protobufSerializer.Encode(obj, &buf); err != nil {
			return nil, "", err
		}
		return buf.Bytes(), protobufType, nil
	}
	return body, jsonType, nil
}

// writeAs sends body (JSON) as mediaType.
func writeAs(c *echo.Context, code int, mediaType string, body []byte, typed typedFunc) error {
	out, contentType, err := encodeAs(mediaType, body, typed)
	if err != nil {
		return err
	}
	return c.Blob(code, contentType, out)
}

// writeValueAs sends v, encoded as JSON first, as mediaType.
func writeValueAs(c *echo.Context, code int, mediaType string, v any, typed typedFunc) error {
	if mediaType == jsonType {
		return c.JSON(code, v)
	}
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return writeAs(c, code, mediaType, body, typed)
}

// writeStatus sends st, an error's or a delete's Status, in the media type negotiated for it.
func writeStatus(c *echo.Context, st *metav1.Status) error {
	noteReason(c, string(st.Reason))
	return writeValueAs(c, int(st.Code), negotiateStatus(c.Request()), st, typedAs[metav1.Status]())
}

// appendPartial appends the PartialObjectMetadata (meta.k8s.io version) of the object whose
// JSON is raw: its metadata, taken from the bytes as they are.
func appendPartial(dst, raw []byte, version string) ([]byte, error) {
	md, found, ok := jsonfast.Member(raw, "metadata")
	if !ok {
		var obj struct {
			Metadata json.RawMessage `json:"metadata"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return dst, err
		}
		md, found = obj.Metadata, obj.Metadata != nil
	}
	if !found {
		md = []byte("{}")
	}
	dst = append(dst, `{"apiVersion":"`+metav1.GroupName+"/"+version+`","kind":"PartialObjectMetadata","metadata":`...)
	dst = append(dst, md...)
	return append(dst, '}'), nil
}
