package registry

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"

	"github.com/opemu/opemu/internal/jsonfast"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// DecodeObject decodes body, which must be exactly one JSON object, the way objects are kept
// (numbers as json.Number, so integers survive exactly); anything else is a 400.
func DecodeObject(body []byte) (map[string]any, error) {
	obj, _, err := DecodeObjectDuplicates(body)
	return obj, err
}

// DecodeObjectDuplicates is DecodeObject that also reports whether some object in body may
// repeat a key (true whenever that was not checked), so a caller that warns about duplicate
// fields as kube-apiserver does needs a second, strict decode only when there are some.
func DecodeObjectDuplicates(body []byte) (obj map[string]any, duplicates bool, err error) {
	if v, dups, ok := jsonfast.Parse(body); ok {
		if obj, isObject := v.(map[string]any); isObject {
			return obj, dups, nil
		}
	}
	obj, err = decodeObjectStd(body)
	return obj, true, err
}

// decodeObjectStd is DecodeObject by encoding/json, which gives every error its message.
func decodeObjectStd(body []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, badRequest("the request body is empty; expected a JSON object")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, badRequest("the body of the request is not valid JSON: %v", err)
	}
	if dec.More() {
		return nil, badRequest("the body of the request holds more than one JSON value")
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, badRequest("the body of the request holds trailing data after the JSON object")
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, badRequest("the body of the request must be a JSON object, not %s", jsonKind(v))
	}
	return obj, nil
}

// UnsupportedMediaType is the 415 kube-apiserver answers for a body format a resource does not
// take.
func UnsupportedMediaType(accepted string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusUnsupportedMediaType,
		Reason:  metav1.StatusReasonUnsupportedMediaType,
		Message: "the body of the request was in an unknown format - accepted media types include: " + accepted,
	}}
}
