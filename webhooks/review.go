package webhooks

import (
	"bytes"
	"context"
	"encoding/json"
	"io"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// Review serves one AdmissionReview v1: it decodes body, runs the chain's mutating
// (mutating=true) or validating handlers, and encodes the answer. A malformed review is a 400
// *apierrors.StatusError.
func Review(ctx context.Context, c *Chain, body []byte, mutating bool) ([]byte, error) {
	var review admissionv1.AdmissionReview
	dec := json.NewDecoder(bytesReader(body))
	if err := dec.Decode(&review); err != nil {
		return nil, apierrors.NewBadRequest("the body is not a valid AdmissionReview: " + err.Error())
	}
	switch {
	case review.Kind != "AdmissionReview" || review.APIVersion != "admission.k8s.io/v1":
		return nil, apierrors.NewBadRequest(`expected apiVersion "admission.k8s.io/v1" and kind "AdmissionReview"`)
	case review.Request == nil:
		return nil, apierrors.NewBadRequest("the AdmissionReview has no request")
	case review.Request.UID == "":
		return nil, apierrors.NewBadRequest("the AdmissionReview request has no uid")
	}
	r := review.Request
	req := &Request{
		UID:         string(r.UID),
		Kind:        r.Kind,
		Resource:    r.Resource,
		SubResource: r.SubResource,
		Name:        r.Name,
		Namespace:   r.Namespace,
		Operation:   Operation(r.Operation),
		DryRun:      r.DryRun != nil && *r.DryRun,
	}
	var err error
	if req.Object, err = decodeRaw(r.Object.Raw); err != nil {
		return nil, apierrors.NewBadRequest("request.object is not a JSON object: " + err.Error())
	}
	if req.OldObject, err = decodeRaw(r.OldObject.Raw); err != nil {
		return nil, apierrors.NewBadRequest("request.oldObject is not a JSON object: " + err.Error())
	}
	if req.Object == nil && (req.Operation == Create || req.Operation == Update) {
		return nil, apierrors.NewBadRequest("request.object is required for " + string(req.Operation))
	}
	if req.Object == nil {
		req.Object = map[string]any{}
	}
	var res Response
	if mutating {
		if res, err = c.Mutate(ctx, req); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	} else {
		res = c.Validate(ctx, req)
	}
	out := &admissionv1.AdmissionResponse{UID: types.UID(req.UID), Allowed: res.Allowed, Warnings: res.Warnings}
	if !res.Allowed && res.Result != nil {
		out.Result = &metav1.Status{Code: res.Result.Code, Message: res.Result.Message, Reason: res.Result.Reason, Status: metav1.StatusFailure}
	}
	if mutating && res.Allowed && len(res.Patch) > 0 {
		patch, err := json.Marshal(res.Patch)
		if err != nil {
			return nil, err
		}
		pt := admissionv1.PatchTypeJSONPatch
		out.PatchType, out.Patch = &pt, patch
	}
	return json.Marshal(admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: out})
}

func decodeRaw(raw []byte) (map[string]any, error) {
	if len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null" {
		return nil, nil
	}
	dec := json.NewDecoder(bytesReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}
