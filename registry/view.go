package registry

import (
	"context"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Kinds that are views of another kind's objects (kinds.Conversion: events.k8s.io/v1 Event is
// a view of v1 Events). A write through a view is checked against the view's schema (unknown
// fields, defaults, types), converted into the stored form and then follows the stored kind's
// write path: its admission, metadata rules and lifecycle, under its key. Reads convert the
// stored object back (View).

// storageTarget returns the target t's writes go to: t itself, or for a view the same object
// in the stored kind.
func (s *Store) storageTarget(t Target) (Target, error) {
	conv := t.Kind.Conversion
	if conv == nil {
		return t, nil
	}
	k, ok := s.cfg.Kinds.Resource(conv.Storage)
	if !ok {
		return t, apierrors.NewNotFound(schema.GroupResource{Group: conv.Storage.Group, Resource: conv.Storage.Resource}, t.Key.Name)
	}
	st := t
	st.Kind = k
	return st, nil
}

// checkView prunes, defaults and validates obj against the view kind of t.
func checkView(t Target, obj map[string]any, o Options) ([]string, error) {
	warnings, err := pruneAndDefault(t, obj, o)
	if err != nil {
		return nil, err
	}
	if t.Kind.Schema != nil {
		if errs := t.Kind.Schema.Validate(obj); len(errs) > 0 {
			return nil, apierrors.NewInvalid(t.groupKind(), stringOf(metadataOf(obj)["name"]), errs)
		}
	}
	return warnings, nil
}

// createView creates obj, an object of the view kind of t, as the stored kind.
func (s *Store) createView(ctx context.Context, t Target, obj map[string]any, o Options) (Result, error) {
	st, err := s.storageTarget(t)
	if err != nil {
		return Result{}, err
	}
	if _, err := metadata(obj); err != nil {
		return Result{}, err
	}
	warnings, err := checkView(t, obj, o)
	if err != nil {
		return Result{}, err
	}
	stored, err := t.Kind.Conversion.ToStorage(obj, nil)
	if err != nil {
		return Result{}, badRequest("converting %s %s: %v", t.Kind.GroupVersion(), t.Kind.Kind, err)
	}
	res, err := s.Create(ctx, st, stored, o)
	res.Warnings = append(warnings, res.Warnings...)
	return res, err
}

// updateView is update through a view: mutate sees and returns the view of the object, which
// is checked and converted back before the stored kind's rules.
func (s *Store) updateView(ctx context.Context, t Target, o Options, mutate MutateFunc) (Result, error) {
	st, err := s.storageTarget(t)
	if err != nil {
		return Result{}, err
	}
	conv := t.Kind.Conversion
	var warnings []string
	res, err := s.update(ctx, st, o, func(cur map[string]any) (map[string]any, error) {
		view, err := conv.FromStorage(deepCopy(cur))
		if err != nil {
			return nil, err
		}
		next, err := mutate(view)
		if err != nil {
			return nil, err
		}
		if err := checkTypeMeta(t.Kind, next); err != nil {
			return nil, err
		}
		if _, err := metadata(next); err != nil {
			return nil, err
		}
		if warnings, err = checkView(t, next, o); err != nil {
			return nil, err
		}
		out, err := conv.ToStorage(next, cur)
		if err != nil {
			return nil, badRequest("converting %s %s: %v", t.Kind.GroupVersion(), t.Kind.Kind, err)
		}
		return out, nil
	})
	res.Warnings = append(warnings, res.Warnings...)
	return res, err
}
