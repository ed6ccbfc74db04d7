package registry

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/webhooks"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// MutateFunc turns the current object into the desired one: a PUT body, a patched document, a
// new status or scale. cur is the decoded current object, which the write path keeps to
// compare with: a MutateFunc must not modify it, and copies (deepCopy) what it changes. A resourceVersion it leaves in the result other
// than the current one is the client's precondition, so the update fails with a conflict.
type MutateFunc func(cur map[string]any) (next map[string]any, err error)

// Update is PUT: body replaces the object (or its status, or its scale). Without a
// resourceVersion in the body the update is unconditional (SPEC §11). For a kind that allows it
// (kinds.Kind.AllowCreateOnUpdate) a PUT of a missing object creates it: Result.Created.
func (s *Store) Update(ctx context.Context, t Target, body map[string]any, o Options) (Result, error) {
	for {
		res, err := s.update(ctx, t, o, func(cur map[string]any) (map[string]any, error) {
			if t.Sub == "scale" {
				return fromScale(t, deepCopy(cur), body)
			}
			if _, err := metadata(body); err != nil {
				return nil, err
			}
			return deepCopy(body), nil
		})
		if !t.Kind.AllowCreateOnUpdate || t.Sub != "" || !errors.Is(err, cache.ErrNotFound) {
			return res, err
		}
		md, err := metadata(body)
		if err != nil {
			return Result{}, err
		}
		if name := stringOf(md["name"]); name != t.Key.Name {
			return Result{}, badRequest("the name of the object (%s) does not match the name on the URL (%s)", name, t.Key.Name)
		}
		res, err = s.Create(ctx, t, deepCopy(body), o)
		if !errors.Is(err, cache.ErrAlreadyExists) { // else created meanwhile: update it
			res.Created = err == nil
			return res, err
		}
	}
}

// update is the write path of a change to an existing object, all of it inside one
// GuaranteedUpdate: mutate, the name, namespace, uid and resourceVersion checks, the status
// rules of the subresource, stamping (kept metadata, generation, finalizer rules), admission,
// the kind's lifecycle. For the main resource of a kind with a status subresource the stored
// status is kept; for /status only status changes; /finalize (a Namespace's) is the main
// resource's update without the kind's PrepareForUpdate, so spec.finalizers may change.
func (s *Store) update(ctx context.Context, t Target, o Options, mutate MutateFunc) (Result, error) {
	if t.Kind.Conversion != nil {
		return s.updateView(ctx, t, o, mutate)
	}
	if err := s.checkWritable(t, t.Key, o); err != nil {
		return Result{}, err
	}
	var (
		seen     *cache.Object // the object the last attempt started from
		removing bool          // the last attempt removes the object
		warnings []string
	)
	stored, err := s.cfg.Storage.GuaranteedUpdate(ctx, t.Key, cache.Preconditions{}, func(curObj *cache.Object) (cache.Update, error) {
		seen, removing, warnings = curObj, false, nil
		cur, err := curObj.Decode()
		if err != nil {
			return cache.Update{}, err
		}
		next, err := mutate(cur)
		if err != nil {
			return cache.Update{}, err
		}
		tracking := !o.applying && !o.tracked
		if t.Sub == "scale" && tracking {
			if next, err = s.trackUpdate(t, cur, next, o, false); err != nil {
				return cache.Update{}, err
			}
		}
		if err := checkUpdate(t, curObj, next, o.decoded); err != nil {
			return cache.Update{}, err
		}
		if t.Sub == "status" {
			next = statusWrite(t.Kind, cur, next)
			if t.Kind.PrepareStatusUpdate != nil {
				t.Kind.PrepareStatusUpdate(next, cur)
			}
		} else if t.Kind.Status {
			if st, ok := cur["status"]; ok {
				next["status"] = st
			} else {
				delete(next, "status")
			}
		}
		md := metadataOf(next)
		md["name"] = t.Key.Name
		if t.Kind.Namespaced {
			md["namespace"] = t.Key.Namespace
		}
		stamp := func() (err error) {
			// As kube-apiserver's BeforeUpdate: after the field manager and mutating
			// admission, before validation (what the strategy fills is nobody's).
			if t.Sub == "" && t.Kind.PrepareForUpdate != nil {
				t.Kind.PrepareForUpdate(next, cur)
			}
			removing, err = stampUpdate(t, curObj, cur, next)
			return err
		}
		var track func() error
		if (t.Sub == "" || t.Sub == "status") && tracking {
			// After pruning and defaulting (and, for /status, what it may change), as
			// kube-apiserver's update handler records ownership of the decoded object.
			track = func() error {
				_, err := s.trackUpdate(t, cur, next, o, true)
				return err
			}
		}
		if t.Sub == "status" {
			if err = stamp(); err == nil {
				warnings, err = s.admitStatus(ctx, t, next, cur, o, track)
			}
		} else {
			warnings, err = s.admit(ctx, admitRequest{t: t, op: webhooks.Update, obj: next, old: cur, o: o, track: track, stamp: stamp})
		}
		if err != nil {
			s.recordRejection(ctx, t, o, t.Key.Name, curObj.UID(), err)
			return cache.Update{}, err
		}
		if lc := t.Kind.Lifecycle; lc != nil && t.Sub == "" {
			w, err := lc.BeforeWrite(ctx, next, cur, o.DryRun)
			if err != nil {
				return cache.Update{}, err
			}
			warnings = append(warnings, w...)
		}
		if t.Kind.Canonicalize != nil && (t.Sub == "" || t.Sub == "finalize") {
			t.Kind.Canonicalize(next)
		}
		if err := beforeCommit(ctx); err != nil {
			return cache.Update{}, err
		}
		return cache.Update{Object: next, Remove: removing}, nil
	}, storeOptions(t.Kind, o))
	if err != nil {
		return Result{}, err
	}
	changed := stored != seen
	if changed && !o.DryRun {
		if lc := t.Kind.Lifecycle; lc != nil {
			if err := lc.AfterWrite(ctx, stored, removing); err != nil {
				return Result{}, err
			}
		}
		switch {
		case removing:
			s.afterRemove(t.Kind, t.Key)
		case t.Kind.Limit != nil:
			t.Kind.Limit.Updated(stored)
		}
	}
	if changed {
		s.recordWrite(ctx, t, o, stored, "Updated", "Updated")
	}
	return Result{Object: stored, Warnings: warnings, Changed: changed}, nil
}

// checkUpdate checks what the client may not change: the kind, the name and namespace of the
// URL, the uid, and the resourceVersion it read (a different one is a conflict). A uid in a
// PUT's body is its precondition (a 409 when it is not the object's); one a patch changes is
// the 422 of an immutable field, as kube-apiserver's metadata validation has it.
func checkUpdate(t Target, cur *cache.Object, next map[string]any, decoded decodedBy) error {
	if err := checkTypeMeta(t.Kind, next); err != nil {
		return err
	}
	md, err := metadata(next)
	if err != nil {
		return err
	}
	if name := stringOf(md["name"]); name != "" && name != t.Key.Name {
		return badRequest("the name of the object (%s) does not match the name on the URL (%s)", name, t.Key.Name)
	}
	if ns := stringOf(md["namespace"]); ns != "" && ns != t.Key.Namespace && t.Kind.Namespaced {
		return badRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if uid := stringOf(md["uid"]); uid != "" && uid != cur.UID() {
		if decoded == fromPatch || decoded == fromStrategicPatch || decoded == fromApply {
			return apierrors.NewInvalid(t.groupKind(), t.Key.Name, apivalidation.ValidateImmutableField(md["uid"], cur.UID(), field.NewPath("metadata", "uid")))
		}
		return apierrors.NewConflict(t.GroupResource(), t.Key.Name,
			fmt.Errorf("Precondition failed: UID in precondition: %s, UID in object meta: %s", uid, cur.UID()))
	}
	if rv := stringOf(md["resourceVersion"]); rv != "" {
		want, err := cache.ParseResourceVersion(rv)
		if err != nil {
			return apierrors.NewInvalid(t.groupKind(), t.Key.Name, field.ErrorList{field.Forbidden(field.NewPath("metadata", "resourceVersion"), "must be a decimal resourceVersion")})
		}
		if want != cur.ResourceVersion() {
			return &cache.Error{Err: cache.ErrConflict, Key: t.Key, Message: "the object has been modified; please apply your changes to the latest version and try again"}
		}
	}
	return nil
}

// statusWrite returns what a write to /status makes of next, the object the client's write
// made: for a kind with StatusResets next with those fields as cur has them (its status and
// other metadata changes kept, as a built-in kind's status strategy keeps them); for the others
// cur with next's status (a custom resource's). Either way next's resourceVersion stays the
// write's precondition, and its managedFields, the field manager's or the client's, are kept
// (absent, cur's stay).
func statusWrite(k *kinds.Kind, cur, next map[string]any) map[string]any {
	if k.StatusResets != nil {
		for _, p := range k.StatusResets {
			path := jsonPath(p)
			if v, ok := kinds.ValueAt(cur, p); ok {
				setPath(next, path, deepCopyValue(v))
			} else if parent, ok := kinds.ValueAt(next, strings.Join(path[:len(path)-1], ".")); ok {
				if m, ok := parent.(map[string]any); ok {
					delete(m, path[len(path)-1])
				}
			}
		}
		return next
	}
	out := deepCopy(cur)
	if st, ok := next["status"]; ok {
		out["status"] = st
	} else {
		delete(out, "status")
	}
	md, nextMD := metadataOf(out), metadataOf(next)
	for _, f := range []string{"resourceVersion", "managedFields"} {
		if v, ok := nextMD[f]; ok {
			md[f] = v
		}
	}
	return out
}
