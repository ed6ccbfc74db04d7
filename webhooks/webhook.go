package webhooks

import (
	"context"
	"encoding/json"
	"net/http"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Operation is what the request does to the object.
type Operation string

// Operations, as AdmissionReview names them.
const (
	Create  Operation = "CREATE"
	Update  Operation = "UPDATE"
	Delete  Operation = "DELETE"
	Connect Operation = "CONNECT"
)

// Request is one object to judge.
type Request struct {
	// UID identifies an AdmissionReview's request; empty for the write path's in-process
	// requests (nothing answers them by UID).
	UID         string
	Kind        metav1.GroupVersionKind
	Resource    metav1.GroupVersionResource
	SubResource string
	Name        string
	Namespace   string
	Operation   Operation
	// Object is the decoded object (numbers may be json.Number, float64 or int64). Mutating
	// handlers must not modify it: they return patches, which Chain.Mutate applies.
	Object map[string]any
	// OldObject is the stored object on UPDATE and DELETE; nil on CREATE.
	OldObject map[string]any
	DryRun    bool
	// UserInfo is who makes the request (AdmissionReview's userInfo). The write path sets it,
	// and Options, only while Chain.Configured holds handlers (no built-in handler reads them).
	// Its slices are shared: handlers must not modify them.
	UserInfo authenticationv1.UserInfo
	// Options is the request's CreateOptions, UpdateOptions or DeleteOptions
	// (meta.k8s.io/v1, with apiVersion and kind), as AdmissionReview's options carries them; nil
	// when unknown.
	Options map[string]any
	// Internal says opemu itself makes the write (its controllers, recorder or elector).
	Internal bool
}

// PatchOperation is one RFC 6902 JSON Patch operation.
type PatchOperation struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	// From is the source of "move" and "copy".
	From string `json:"from,omitempty"`
	// Value is the value of "add", "replace" and "test"; nil is JSON's null, which these
	// operations carry as a value (MarshalJSON writes it), as kube-apiserver keeps it.
	Value any `json:"value,omitempty"`
}

// MarshalJSON writes op as RFC 6902 has it: "add", "replace" and "test" always carry their
// value, null included (a null dropped would make "add" fail, or a webhook's patch mean
// something else); other operations carry one only when set.
func (op PatchOperation) MarshalJSON() ([]byte, error) {
	type plain PatchOperation // no MarshalJSON: no recursion
	if op.Value != nil {
		return json.Marshal(plain(op))
	}
	switch op.Op {
	case "add", "replace", "test":
		return json.Marshal(struct {
			Op    string `json:"op"`
			Path  string `json:"path"`
			From  string `json:"from,omitempty"`
			Value any    `json:"value"`
		}{op.Op, op.Path, op.From, nil})
	}
	return json.Marshal(plain(op))
}

// Response is a handler's verdict.
type Response struct {
	Allowed bool
	// Result explains a denial: code 403, reason Forbidden, the policy's message.
	Result   *metav1.Status
	Warnings []string
	// Patch mutates the object (mutating handlers only).
	Patch []PatchOperation
	// External, in what Chain.Mutate returns, says a handler marked Named.External patched the
	// object: it may now hold fields its kind's schema does not know, which the caller prunes
	// (and defaults) again, as kube-apiserver does after admission webhooks.
	External bool
}

// Handler judges one request.
type Handler interface {
	Handle(ctx context.Context, req *Request) Response
}

// InPlace is a mutating Handler that can also make its changes to req.Object itself
// (Chain.Apply, the write path): the very changes its patch makes, without building the patch
// or copying its values. Its Response then carries no Patch.
type InPlace interface {
	Handler
	HandleInPlace(ctx context.Context, req *Request) Response
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *Request) Response

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, req *Request) Response { return f(ctx, req) }

var _ Handler = HandlerFunc(nil)

// Allowed admits the request, with optional warnings.
func Allowed(warnings ...string) Response { return Response{Allowed: true, Warnings: warnings} }

// Denied refuses the request with a 403 and message.
func Denied(message string) Response {
	return Response{Result: &metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusForbidden,
		Reason:  metav1.StatusReasonForbidden,
		Message: message,
	}}
}

// Patched admits the request with patches to apply.
func Patched(ops ...PatchOperation) Response { return Response{Allowed: true, Patch: ops} }
