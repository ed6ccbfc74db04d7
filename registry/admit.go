package registry

import (
	"context"
	"net/http"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/webhooks"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Admission, in SPEC §6's order: pruning and schema defaulting, mutating admission, metadata
// and schema validation (422, one cause per field), validating admission (403 on denial).

// admitRequest is one object on its way through admission.
type admitRequest struct {
	t   Target
	op  webhooks.Operation
	obj map[string]any
	old map[string]any // nil on create
	o   Options
	// track runs after pruning and defaulting and before mutating admission: the write's
	// managedFields are recorded there, as kube-apiserver's create handler records them.
	track func() error
	// stamp runs after mutating admission and before validation: the server-owned metadata
	// (and a generated name) are set there, as kube-apiserver's BeforeCreate does.
	stamp func() error
}

// admit runs admission on r.obj, which it modifies in place, and returns the warnings.
func (s *Store) admit(ctx context.Context, r admitRequest) ([]string, error) {
	warnings, err := pruneAndDefault(r.t, r.obj, r.o)
	if err != nil {
		return nil, err
	}
	if r.op == webhooks.Create && r.t.Kind.Namespaced {
		// kube-apiserver's first admission plugin, NamespaceLifecycle: what is sent into a
		// namespace that is missing or Terminating is refused before it is judged.
		md := metadataOf(r.obj)
		name := stringOf(md["name"])
		if name == "" {
			name = stringOf(md["generateName"])
		}
		if err := s.admitIntoNamespace(ctx, r.t.Key, name); err != nil {
			return nil, err
		}
	}
	if r.track != nil {
		if err := r.track(); err != nil {
			return nil, err
		}
	}
	var req *webhooks.Request
	if s.cfg.Admission != nil {
		req = s.admissionRequest(r.t, r.op, r.obj, r.old, r.o)
		mres, err := s.cfg.Admission.Apply(ctx, req)
		if err != nil {
			return nil, err
		}
		warnings = append(warnings, mres.Warnings...)
		if !mres.Allowed {
			return nil, admissionDenied(r.t, req.Name, mres)
		}
		if mres.External {
			// What an admission webhook made is pruned and defaulted again, silently, as
			// kube-apiserver does with the output of mutating webhooks.
			if _, err := pruneAndDefault(r.t, r.obj, Options{FieldValidation: "Ignore"}); err != nil {
				return nil, err
			}
		}
	}
	if r.stamp != nil {
		if err := r.stamp(); err != nil {
			return nil, err
		}
	}
	w, err := validate(r.t, r.obj, r.old, r.o)
	if err != nil {
		return nil, err
	}
	warnings = append(warnings, w...)
	if w, ok := r.t.Kind.Schema.(kinds.Warner); ok {
		warnings = append(warnings, w.Warnings(r.obj)...)
	}
	if req != nil {
		req.Name = stringOf(metadataOf(r.obj)["name"])
		vres := s.cfg.Admission.Validate(ctx, req)
		warnings = append(warnings, vres.Warnings...)
		if !vres.Allowed {
			return nil, admissionDenied(r.t, req.Name, vres)
		}
	}
	return warnings, nil
}

// admitStatus is the path of a /status write: pruning, defaulting and schema validation, and
// the admission webhooks configured in the API whose rules name the status subresource (no
// built-in handler judges status writes). cur is the stored object; track, when set, records
// the write's ownership after pruning and defaulting.
func (s *Store) admitStatus(ctx context.Context, t Target, obj, cur map[string]any, o Options, track func() error) ([]string, error) {
	warnings, err := pruneAndDefault(t, obj, o)
	if err != nil {
		return nil, err
	}
	if track != nil {
		if err := track(); err != nil {
			return nil, err
		}
	}
	if !s.cfg.Admission.HasConfigured() {
		w, err := validate(t, obj, cur, o)
		return append(warnings, w...), err
	}
	req := s.admissionRequest(t, webhooks.Update, obj, cur, o)
	mres, err := s.cfg.Admission.Apply(ctx, req)
	if err != nil {
		return nil, err
	}
	warnings = append(warnings, mres.Warnings...)
	if !mres.Allowed {
		return nil, admissionDenied(t, req.Name, mres)
	}
	if mres.External {
		if _, err := pruneAndDefault(t, obj, Options{FieldValidation: "Ignore"}); err != nil {
			return nil, err
		}
	}
	w, err := validate(t, obj, cur, o)
	if err != nil {
		return nil, err
	}
	warnings = append(warnings, w...)
	vres := s.cfg.Admission.Validate(ctx, req)
	warnings = append(warnings, vres.Warnings...)
	if !vres.Allowed {
		return nil, admissionDenied(t, req.Name, vres)
	}
	return warnings, nil
}

// admitDelete runs admission on the DELETE of t's object, as it is stored now (no object: the
// delete goes on to its 404). It runs only when admission webhooks are configured in the API:
// no built-in handler judges deletes.
func (s *Store) admitDelete(ctx context.Context, t Target, pre cache.Preconditions, o Options) error {
	if !s.cfg.Admission.HasConfigured() {
		return nil
	}
	curObj, err := s.cfg.Storage.Get(ctx, t.Key)
	if err != nil {
		return nil
	}
	cur, err := curObj.Decode()
	if err != nil {
		return err
	}
	req := s.admissionRequest(t, webhooks.Delete, nil, cur, o)
	req.Name = t.Key.Name
	if opts := req.Options; opts != nil && (pre.UID != "" || pre.ResourceVersion != "") {
		p := map[string]any{}
		if pre.UID != "" {
			p["uid"] = pre.UID
		}
		if pre.ResourceVersion != "" {
			p["resourceVersion"] = pre.ResourceVersion
		}
		opts["preconditions"] = p
	}
	res, err := s.cfg.Admission.Apply(ctx, req)
	if err == nil && res.Allowed {
		res = s.cfg.Admission.Validate(ctx, req)
	}
	if err != nil {
		return err
	}
	if !res.Allowed {
		err := admissionDenied(t, t.Key.Name, res)
		s.recordRejection(ctx, t, o, t.Key.Name, curObj.UID(), err)
		return err
	}
	return nil
}

// admissionRequest describes a write for the admission chain: what AdmissionReview v1 carries.
// The user and the options are filled in only while admission webhooks are configured: no
// built-in handler reads them, and the hot path of writes does not pay for them.
func (s *Store) admissionRequest(t Target, op webhooks.Operation, obj, old map[string]any, o Options) *webhooks.Request {
	name := t.Key.Name
	if obj != nil {
		name = stringOf(metadataOf(obj)["name"])
	}
	req := &webhooks.Request{
		Kind:        metav1.GroupVersionKind{Group: t.Kind.Group, Version: t.Kind.Version, Kind: t.Kind.Kind},
		Resource:    metav1.GroupVersionResource{Group: t.Kind.Group, Version: t.Kind.Version, Resource: t.Kind.Plural},
		SubResource: t.Sub,
		Name:        name,
		Namespace:   t.Key.Namespace,
		Operation:   op,
		Object:      obj,
		OldObject:   old,
		DryRun:      o.DryRun,
		Internal:    o.Internal,
	}
	if s.cfg.Admission.HasConfigured() {
		req.UserInfo, req.Options = userInfo(o), writeOptions(op, o)
	}
	return req
}

// The groups of userInfo, shared (read only).
var (
	authenticatedGroups   = []string{"system:authenticated"}
	internalGroups        = []string{"system:masters", "system:authenticated"}
	unauthenticatedGroups = []string{"system:unauthenticated"}
)

// userInfo names who makes a write, as kube-apiserver's authenticators would: the
// authenticated user, opemu's own components as system:opemu:<component>, anyone else as
// system:anonymous.
func userInfo(o Options) authenticationv1.UserInfo {
	switch {
	case o.User != "":
		groups := o.UserGroups
		if len(groups) == 0 {
			groups = authenticatedGroups
		}
		return authenticationv1.UserInfo{Username: o.User, UID: o.UserUID, Groups: groups}
	case o.Internal:
		return authenticationv1.UserInfo{Username: "system:opemu:" + o.FieldManager, Groups: internalGroups}
	}
	return authenticationv1.UserInfo{Username: "system:anonymous", Groups: unauthenticatedGroups}
}

// writeOptions is the CreateOptions, UpdateOptions or DeleteOptions of a write.
func writeOptions(op webhooks.Operation, o Options) map[string]any {
	kind := map[webhooks.Operation]string{webhooks.Create: "CreateOptions", webhooks.Update: "UpdateOptions", webhooks.Delete: "DeleteOptions"}[op]
	out := map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": kind}
	if o.DryRun {
		out["dryRun"] = []any{"All"}
	}
	if op != webhooks.Delete {
		if o.FieldManager != "" {
			out["fieldManager"] = o.FieldManager
		}
		if o.FieldValidation != "" {
			out["fieldValidation"] = o.FieldValidation
		}
	}
	return out
}

// pruneAndDefault drops unknown fields as fieldValidation says (unless the object was pruned
// when it was decoded from the request) and applies schema defaults.
func pruneAndDefault(t Target, obj map[string]any, o Options) ([]string, error) {
	if t.Kind.Schema == nil {
		return nil, nil
	}
	var warnings []string
	if o.decoded == notDecoded {
		var err error
		if warnings, err = pruneUnknown(t, obj, o); err != nil {
			return nil, err
		}
	}
	t.Kind.Schema.Default(obj)
	return warnings, nil
}

// pruneUnknown drops the fields t's schema does not know: silently (Ignore), with a warning
// each (Warn, the default), or refuses them (Strict) with the 400 of kube-apiserver's decoder.
func pruneUnknown(t Target, obj map[string]any, o Options) ([]string, error) {
	if t.Kind.Schema == nil {
		return nil, nil
	}
	gvk := bodyTypeOf(Target{Kind: t.Kind}).gvk
	return strictOutcome(o.FieldValidation, unknownFieldErrors(t.Kind.Schema.Prune(obj)), func(err error) error {
		return cannotHandle(gvk, gvk.Kind, err)
	})
}

// validate checks metadata as Kubernetes' ObjectMeta rules say (the name by the kind's rule)
// and the object against the kind's schema, as a change of old (the stored object) when old is
// not nil (validateSchema); every failure is one cause of a 422. The warnings are the schema's
// (failures it let through).
//
// Null label and annotation values are written as "", as decoding into ObjectMeta does in
// Kubernetes, so nothing stored holds a null where clients expect a string.
func validate(t Target, obj, old map[string]any, o Options) ([]string, error) {
	md := metadataOf(obj)
	for _, f := range []string{"labels", "annotations"} {
		if m, ok := md[f].(map[string]any); ok {
			for k, v := range m {
				if v == nil {
					m[k] = ""
				}
			}
		}
	}
	nameRule := t.Kind.NameValidator()
	if metaQuicklyValid(md, t.Kind.Namespaced) && (t.Kind.NameRule == nil || nameRule(stringOf(md["name"]), false) == nil) {
		errs, warnings := validateSchema(t, obj, old)
		if len(errs) > 0 {
			if err := typedDecodeError(t, obj, o); err != nil {
				return nil, err
			}
			return nil, apierrors.NewInvalid(t.groupKind(), stringOf(md["name"]), uniqueErrors(t, errs))
		}
		return append(warnings, finalizerWarnings(t, obj, old)...), nil
	}
	meta, err := objectMetaOf(md)
	if err != nil {
		if err := typedDecodeError(t, obj, o); err != nil {
			return nil, err
		}
		return nil, badRequest("metadata: %v", err)
	}
	checked := meta
	if kinds.LabelsValid(meta.Labels) {
		// Valid labels add no error: ValidateObjectMeta need not run its expressions on them.
		checked.Labels = nil
	}
	if kinds.FinalizersValid(meta.Finalizers) {
		checked.Finalizers = nil // likewise
	}
	errs := apivalidation.ValidateObjectMeta(&checked, t.Kind.Namespaced, nameRule, field.NewPath("metadata"))
	schemaErrs, warnings := validateSchema(t, obj, old)
	errs = append(errs, schemaErrs...)
	if len(errs) > 0 {
		if err := typedDecodeError(t, obj, o); err != nil {
			return nil, err
		}
		return nil, apierrors.NewInvalid(t.groupKind(), meta.Name, uniqueErrors(t, errs))
	}
	return append(warnings, finalizerWarnings(t, obj, old)...), nil
}

// uniqueErrors drops the repeated errors of a built-in kind (the same field, reason and
// message), as kube-apiserver reports two of a template's labels with the same bad value once.
func uniqueErrors(t Target, errs field.ErrorList) field.ErrorList {
	if len(errs) < 2 || !t.Kind.BuiltIn() {
		return errs
	}
	seen := make(map[string]bool, len(errs))
	out := errs[:0:0]
	for _, e := range errs {
		if k := e.Error(); !seen[k] {
			seen[k] = true
			out = append(out, e)
		}
	}
	return out
}

// validateSchema checks obj against t's schema: a create, or a change of old, the stored
// object, when old is not nil and the schema has rules on changes (kinds.UpdateSchema, which
// may let failures through as warnings).
func validateSchema(t Target, obj, old map[string]any) (field.ErrorList, []string) {
	if t.Kind.Schema == nil {
		return nil, nil
	}
	if us, ok := t.Kind.Schema.(kinds.UpdateSchema); ok && old != nil {
		return us.ValidateUpdate(obj, old, t.Sub)
	}
	return t.Kind.Schema.Validate(obj), nil
}

// admissionDenied is the error a denial answers: 403 Forbidden with the handler's message, or
// the code and reason the handler gave (an admission webhook may answer any failure code; one
// that cannot be reached answers 500).
func admissionDenied(t Target, name string, res webhooks.Response) error {
	msg := "admission denied the request"
	code, reason := int32(http.StatusForbidden), metav1.StatusReasonForbidden
	if r := res.Result; r != nil {
		if r.Message != "" {
			msg = r.Message
		}
		if r.Code >= http.StatusBadRequest {
			code, reason = r.Code, r.Reason
		}
	}
	details := &metav1.StatusDetails{Name: name, Group: t.Kind.Group, Kind: t.Kind.Plural}
	if r := res.Result; r != nil && r.Details != nil {
		// A webhook's own details (its causes above all) reach the client as kube-apiserver
		// passes them on: a controller-runtime validator's field errors stay field errors.
		d := *r.Details
		details = &d
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    code,
		Reason:  reason,
		Message: msg,
		Details: details,
	}}
}
