package registry

import (
	"context"
	"errors"

	"github.com/opemu/opemu/cache"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// checkView prunes, defaults and validates obj against the view kind of t: its schema and its
// rule of names (the stored kind's write path checks the rest of metadata). Errors name the
// stored kind's group, as kube-apiserver validates the one internal type of both.
func checkView(t Target, obj, old map[string]any, o Options) ([]string, error) {
	warnings, err := pruneAndDefault(t, obj, o)
	if err != nil {
		return nil, err
	}
	md := metadataOf(obj)
	var errs field.ErrorList
	rule := t.Kind.NameValidator()
	if name := stringOf(md["name"]); name != "" {
		for _, msg := range rule(name, false) {
			errs = append(errs, field.Invalid(field.NewPath("metadata", "name"), name, msg))
		}
	}
	schemaErrs, schemaWarnings := validateSchema(t, obj, old)
	errs = append(errs, schemaErrs...)
	warnings = append(warnings, schemaWarnings...)
	if len(errs) > 0 {
		gk := schema.GroupKind{Group: t.Kind.Conversion.Storage.Group, Kind: t.Kind.Kind}
		return nil, apierrors.NewInvalid(gk, stringOf(md["name"]), errs)
	}
	return warnings, nil
}

// viewError names the view's resource in a store error about its stored object (a 404 or 409
// of an events.k8s.io Event names events.events.k8s.io, as kube-apiserver's does).
func viewError(t Target, err error) error {
	var cerr *cache.Error
	if t.Kind.Conversion == nil || !errors.As(err, &cerr) || cerr.Key.GroupResource() != t.Kind.Conversion.Storage {
		return err
	}
	named := *cerr
	named.Key.Group, named.Key.Resource = t.Kind.Group, t.Kind.Plural
	return &named
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
	warnings, err := checkView(t, obj, nil, o)
	if err != nil {
		return Result{}, err
	}
	if !o.applying {
		// Ownership is the view's, in its version, as kube-apiserver records it.
		if err := s.trackCreate(t, obj, o); err != nil {
			return Result{}, err
		}
		o.tracked = true
	}
	stored, err := t.Kind.Conversion.ToStorage(obj, nil)
	if err != nil {
		return Result{}, viewConversionError(t, err)
	}
	res, err := s.Create(ctx, st, stored, o)
	res.Warnings = append(warnings, res.Warnings...)
	return res, viewError(t, err)
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
	track := !o.applying
	o.tracked = true
	res, err := s.update(ctx, st, o, func(cur map[string]any) (map[string]any, error) {
		view, err := conv.FromStorage(deepCopy(cur))
		if err != nil {
			return nil, viewConversionError(t, err)
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
		if warnings, err = checkView(t, next, view, o); err != nil {
			return nil, err
		}
		if track {
			if next, err = s.trackUpdate(t, view, next, o, true); err != nil {
				return nil, err
			}
		}
		out, err := conv.ToStorage(next, cur)
		if err != nil {
			return nil, viewConversionError(t, err)
		}
		return out, nil
	})
	res.Warnings = append(warnings, res.Warnings...)
	return res, viewError(t, err)
}

// viewConversionError is the error of a write whose object cannot be converted: a 400 for a
// built-in view (the object does not fit), and for a custom resource, whose CRD's converter
// failed (a conversion webhook), kube-apiserver's 500 with the converter's message.
func viewConversionError(t Target, err error) error {
	if t.Kind.BuiltIn() {
		return badRequest("converting %s %s: %v", t.Kind.GroupVersion(), t.Kind.Kind, err)
	}
	return serverError(err.Error())
}
