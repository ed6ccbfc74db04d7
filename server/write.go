package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/webhooks"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// writeResult is what a write hands back to its handler.
type writeResult struct {
	obj      *cache.Object
	warnings []string
	changed  bool // false for a no-op update
}

// maxUpdateAttempts bounds the read-modify-write loop of updates that carry no precondition.
const maxUpdateAttempts = 8

// create runs the write path for a new object of t.kind in t.key.Namespace (SPEC §6): type
// checks, pruning and defaulting, mutating admission, metadata and schema validation,
// validating admission, then the store.
func (s *Server) create(ctx context.Context, t target, obj map[string]any, o writeOptions) (writeResult, error) {
	if err := checkTypeMeta(t.kind, obj); err != nil {
		return writeResult{}, err
	}
	md, err := metadata(obj)
	if err != nil {
		return writeResult{}, err
	}
	if name, _ := md["name"].(string); name != "" {
		k := t.key
		k.Name = name
		if err := s.checkWritable(t, k); err != nil {
			return writeResult{}, err
		}
	}
	if ns, _ := md["namespace"].(string); ns != "" && ns != t.key.Namespace && t.kind.Namespaced {
		return writeResult{}, badRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if t.kind.Namespaced {
		md["namespace"] = t.key.Namespace
	}
	key := t.key
	key.Name, _ = md["name"].(string)
	if t.kind.Status {
		delete(obj, "status")
	}
	if t.kind.PrepareForCreate != nil {
		t.kind.PrepareForCreate(obj)
	}
	warnings, err := s.admit(ctx, t, webhooks.Operation("CREATE"), obj, nil, o)
	if err != nil {
		s.recordRejection(ctx, t, o, key.Name, "", err)
		return writeResult{}, err
	}
	if lc := t.kind.Lifecycle; lc != nil {
		w, err := lc.BeforeWrite(ctx, obj, nil, o.dryRun)
		if err != nil {
			return writeResult{}, err
		}
		warnings = append(warnings, w...)
	}
	stored, err := s.cfg.Store.Create(ctx, key, obj, cache.WriteOptions{DryRun: o.dryRun})
	if err != nil {
		return writeResult{}, err
	}
	if lc := t.kind.Lifecycle; lc != nil && !o.dryRun {
		if err := lc.AfterWrite(ctx, stored, false); err != nil {
			return writeResult{}, err
		}
	}
	s.recordWrite(ctx, t, o, stored, "Created", "Created")
	return writeResult{obj: stored, warnings: warnings, changed: true}, nil
}

// mutateFunc turns the current object into the desired one. pinned reports that the result
// carries a resourceVersion the client chose, so a conflict goes back to the client instead of
// being retried.
type mutateFunc func(cur map[string]any) (next map[string]any, pinned bool, err error)

// update is Kubernetes' GuaranteedUpdate: read the current object, compute the next one, run it
// through admission and store it if the object did not change meanwhile; retry otherwise. For
// the main resource the stored status is kept; for /status only status changes.
func (s *Server) update(ctx context.Context, t target, o writeOptions, mutate mutateFunc) (writeResult, error) {
	if err := s.checkWritable(t, t.key); err != nil {
		return writeResult{}, err
	}
	for attempt := 1; ; attempt++ {
		curObj, err := s.cfg.Store.Get(ctx, t.key)
		if err != nil {
			return writeResult{}, err
		}
		cur, err := curObj.Decode()
		if err != nil {
			return writeResult{}, err
		}
		next, pinned, err := mutate(deepCopy(cur))
		if err != nil {
			return writeResult{}, err
		}
		if t.sub == "" && !o.applying {
			next = s.trackUpdate(t.kind, cur, next, managerOrUserAgent(o.fieldManager, o.userAgent))
		}
		if err := checkTypeMeta(t.kind, next); err != nil {
			return writeResult{}, err
		}
		md, err := metadata(next)
		if err != nil {
			return writeResult{}, err
		}
		if name, _ := md["name"].(string); name != "" && name != t.key.Name {
			return writeResult{}, badRequest("the name of the object (%s) does not match the name on the URL (%s)", name, t.key.Name)
		}
		if ns, _ := md["namespace"].(string); ns != "" && ns != t.key.Namespace && t.kind.Namespaced {
			return writeResult{}, badRequest("the namespace of the provided object does not match the namespace sent on the request")
		}
		if uid, _ := md["uid"].(string); uid != "" && uid != curObj.UID() {
			return writeResult{}, apierrors.NewConflict(t.gr(), t.key.Name,
				fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", uid, curObj.UID()))
		}
		if t.sub == "status" {
			next = withStatusOf(cur, next)
		} else if t.kind.Status {
			if st, ok := cur["status"]; ok {
				next["status"] = st
			} else {
				delete(next, "status")
			}
		}
		md = metadataOf(next)
		md["name"] = t.key.Name
		if t.kind.Namespaced {
			md["namespace"] = t.key.Namespace
		}
		if !pinned {
			md["resourceVersion"] = formatRV(curObj.ResourceVersion())
		}
		var warnings []string
		if t.sub == "status" {
			warnings, err = s.admitStatus(t, next, o)
		} else {
			warnings, err = s.admit(ctx, t, webhooks.Operation("UPDATE"), next, cur, o)
		}
		if err != nil {
			s.recordRejection(ctx, t, o, t.key.Name, curObj.UID(), err)
			return writeResult{}, err
		}
		if lc := t.kind.Lifecycle; lc != nil && t.sub == "" {
			w, err := lc.BeforeWrite(ctx, next, cur, o.dryRun)
			if err != nil {
				return writeResult{}, err
			}
			warnings = append(warnings, w...)
		}
		stored, err := s.cfg.Store.Update(ctx, t.key, next, cache.WriteOptions{DryRun: o.dryRun})
		if errors.Is(err, cache.ErrConflict) && !pinned && attempt < maxUpdateAttempts {
			continue
		}
		if err != nil {
			return writeResult{}, err
		}
		changed := stored != curObj
		if lc := t.kind.Lifecycle; lc != nil && changed && !o.dryRun {
			if err := lc.AfterWrite(ctx, stored, stored.ResourceVersion() != 0 && isGone(ctx, s.cfg.Store, t.key)); err != nil {
				return writeResult{}, err
			}
		}
		if changed {
			s.recordWrite(ctx, t, o, stored, "Updated", "Updated")
		}
		return writeResult{obj: stored, warnings: warnings, changed: changed}, nil
	}
}

// withStatusOf returns cur with only its status taken from next (a /status write).
func withStatusOf(cur, next map[string]any) map[string]any {
	out := deepCopy(cur)
	if st, ok := next["status"]; ok {
		out["status"] = st
	} else {
		delete(out, "status")
	}
	md := metadataOf(out)
	if rv, ok := metadataOf(next)["resourceVersion"]; ok {
		md["resourceVersion"] = rv
	}
	return out
}

// admit runs pruning, defaulting, mutating admission, metadata and schema validation and
// validating admission on obj, in that order (SPEC §6). obj is modified in place.
func (s *Server) admit(ctx context.Context, t target, op webhooks.Operation, obj, old map[string]any, o writeOptions) ([]string, error) {
	warnings, err := s.pruneAndDefault(t, obj, o)
	if err != nil {
		return nil, err
	}
	req := &webhooks.Request{
		UID:         newUID(),
		Kind:        metav1.GroupVersionKind{Group: t.kind.Group, Version: t.kind.Version, Kind: t.kind.Kind},
		Resource:    metav1.GroupVersionResource{Group: t.kind.Group, Version: t.kind.Version, Resource: t.kind.Plural},
		SubResource: t.sub,
		Name:        stringOf(metadataOf(obj)["name"]),
		Namespace:   t.key.Namespace,
		Operation:   op,
		Object:      obj,
		OldObject:   old,
		DryRun:      o.dryRun,
	}
	mres, err := s.cfg.Admission.Mutate(ctx, req)
	if err != nil {
		return nil, err
	}
	warnings = append(warnings, mres.Warnings...)
	if !mres.Allowed {
		return nil, admissionDenied(t, req.Name, mres)
	}
	if err := s.validate(t, obj); err != nil {
		return nil, err
	}
	vres := s.cfg.Admission.Validate(ctx, req)
	warnings = append(warnings, vres.Warnings...)
	if !vres.Allowed {
		return nil, admissionDenied(t, req.Name, vres)
	}
	return warnings, nil
}

// admitStatus is the path of a /status write: pruning, defaulting and schema validation only.
func (s *Server) admitStatus(t target, obj map[string]any, o writeOptions) ([]string, error) {
	warnings, err := s.pruneAndDefault(t, obj, o)
	if err != nil {
		return nil, err
	}
	return warnings, s.validate(t, obj)
}

// pruneAndDefault drops unknown fields as fieldValidation says and applies schema defaults.
func (s *Server) pruneAndDefault(t target, obj map[string]any, o writeOptions) ([]string, error) {
	var unknown []string
	if t.kind.Schema != nil {
		unknown = t.kind.Schema.Prune(obj)
	}
	var warnings []string
	if len(unknown) > 0 {
		switch o.fieldValidation {
		case "Strict":
			quoted := make([]string, len(unknown))
			for i, f := range unknown {
				quoted[i] = fmt.Sprintf("unknown field %q", f)
			}
			return nil, badRequest("strict decoding error: %s", strings.Join(quoted, ", "))
		case "Warn":
			for _, f := range unknown {
				warnings = append(warnings, fmt.Sprintf("unknown field %q", f))
			}
		}
	}
	if t.kind.Schema != nil {
		t.kind.Schema.Default(obj)
	}
	return warnings, nil
}

// validate checks metadata as Kubernetes' ObjectMeta rules say and the object against the
// kind's schema; every failure is one cause of a 422.
//
// Null label and annotation values are written as "", as decoding into ObjectMeta does in
// Kubernetes, so nothing stored holds a null where clients expect a string.
func (s *Server) validate(t target, obj map[string]any) error {
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
	meta, err := objectMetaOf(md)
	if err != nil {
		return badRequest("metadata: %v", err)
	}
	errs := apivalidation.ValidateObjectMeta(&meta, t.kind.Namespaced, apivalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	if t.kind.Schema != nil {
		errs = append(errs, t.kind.Schema.Validate(obj)...)
	}
	if len(errs) > 0 {
		return apierrors.NewInvalid(schema.GroupKind{Group: t.kind.Group, Kind: t.kind.Kind}, meta.Name, errs)
	}
	return nil
}

// admissionDenied is the 403 a denial answers, with the policy's own message.
func admissionDenied(t target, name string, res webhooks.Response) error {
	msg := "admission denied the request"
	if res.Result != nil && res.Result.Message != "" {
		msg = res.Result.Message
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusForbidden,
		Reason:  metav1.StatusReasonForbidden,
		Message: msg,
		Details: &metav1.StatusDetails{Name: name, Group: t.kind.Group, Kind: t.kind.Plural},
	}}
}

// checkTypeMeta requires apiVersion and kind to name the URL's kind.
func checkTypeMeta(k *kinds.Kind, obj map[string]any) error {
	av, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	switch {
	case kind == "":
		return badRequest("Object 'Kind' is missing in the request body")
	case av == "":
		return badRequest("Object 'apiVersion' is missing in the request body")
	case av != k.GroupVersion():
		return badRequest("the API version in the data (%s) does not match the expected API version (%s)", av, k.GroupVersion())
	case kind != k.Kind:
		return badRequest("the kind in the data (%s) does not match the expected kind (%s)", kind, k.Kind)
	}
	return nil
}

// metadata returns obj's metadata, creating an empty one when absent; a metadata that is not
// an object is a 400.
func metadata(obj map[string]any) (map[string]any, error) {
	switch md := obj["metadata"].(type) {
	case map[string]any:
		return md, nil
	case nil:
		m := map[string]any{}
		obj["metadata"] = m
		return m, nil
	default:
		return nil, badRequest("metadata must be a JSON object, not %s", jsonKind(md))
	}
}

// deleteObject deletes t.key (SPEC §2: finalizers mark, others remove).
func (s *Server) delete(ctx context.Context, t target, pre cache.Preconditions, o writeOptions) (*cache.Object, bool, error) {
	if err := s.checkWritable(t, t.key); err != nil {
		return nil, false, err
	}
	if lc := t.kind.Lifecycle; lc != nil {
		if err := lc.BeforeDelete(ctx, t.key.Name); err != nil {
			return nil, false, err
		}
	}
	obj, removed, err := s.cfg.Store.Delete(ctx, t.key, pre, cache.WriteOptions{DryRun: o.dryRun})
	if lc := t.kind.Lifecycle; lc != nil && err == nil && removed && !o.dryRun {
		err = lc.AfterWrite(ctx, obj, true)
	}
	if err == nil {
		s.recordWrite(ctx, t, o, obj, "Deleted", "Deleted")
	}
	return obj, removed, err
}

// checkWritable refuses client writes to objects the server owns (the mirrored Lease).
func (s *Server) checkWritable(t target, key cache.Key) error {
	if s.cfg.ReadOnly != nil && s.cfg.ReadOnly(key) {
		return apierrors.NewForbidden(t.gr(), key.Name,
			errors.New("this Lease mirrors the file lease backend and is written only by the elector"))
	}
	return nil
}

// deleteAll deletes every object q selects in t (deletecollection), one Delete each.
func (s *Server) deleteAll(ctx context.Context, t target, q listQuery, pre cache.Preconditions, o writeOptions) ([]*cache.Object, metav1.ListMeta, error) {
	items, meta, err := s.list(ctx, t, q)
	if err != nil {
		return nil, meta, err
	}
	out := make([]*cache.Object, 0, len(items))
	for _, it := range items {
		one := t
		one.key = it.Key()
		obj, _, err := s.delete(ctx, one, pre, o)
		if errors.Is(err, cache.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, meta, err
		}
		out = append(out, obj)
	}
	meta.ResourceVersion = formatRV(s.cfg.Store.ResourceVersion())
	return out, meta, nil
}

// isGone reports whether key no longer exists (an update that removed the last finalizer of an
// object being deleted).
func isGone(ctx context.Context, store *cache.Store, key cache.Key) bool {
	_, err := store.Get(ctx, key)
	return errors.Is(err, cache.ErrNotFound)
}
