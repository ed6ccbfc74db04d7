package registry

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/internal/jsonfast"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"k8s.io/apimachinery/pkg/util/strategicpatch"
)

// Patch media types.
const (
	jsonPatchType      = "application/json-patch+json"
	mergePatchType     = "application/merge-patch+json"
	applyPatchType     = "application/apply-patch+yaml"
	strategicPatchType = "application/strategic-merge-patch+json"
)

const customResourcePatchTypes = jsonPatchType + ", " + mergePatchType + ", " + applyPatchType

// Patch applies a JSON Patch, a JSON merge patch, a strategic merge patch (kinds with a Go
// type) or a server-side apply to t's object (or its /status or /scale view) through the
// update path. Result.Created says an apply created the object.
func (s *Store) Patch(ctx context.Context, t Target, patchType string, body []byte, o Options) (Result, error) {
	if o.Force && patchType != applyPatchType {
		return Result{}, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "PatchOptions"}, "",
			field.ErrorList{field.Forbidden(field.NewPath("force"), "may not be specified for non-apply patch")})
	}
	var apply func(doc []byte) ([]byte, error)
	switch patchType {
	case jsonPatchType:
		p, err := jsonpatch.DecodePatch(body)
		if err == nil {
			err = requireMembers(p)
		}
		if err != nil {
			return Result{}, badRequest("the body of the request is not a valid JSON Patch: %v", err)
		}
		if err := checkJSONPatchSize(len(p), 0); err != nil {
			return Result{}, err
		}
		apply = func(doc []byte) ([]byte, error) {
			if err := checkJSONPatchSize(len(p), len(doc)); err != nil {
				return nil, err
			}
			out, err := p.ApplyWithOptions(doc, s.jsonPatchOptions())
			if err != nil {
				return nil, invalidPatch(t, err)
			}
			return out, nil
		}
	case mergePatchType:
		if _, err := DecodeObject(body); err != nil {
			return Result{}, err
		}
		apply = func(doc []byte) ([]byte, error) {
			out, err := jsonpatch.MergePatch(doc, body)
			if err != nil {
				return nil, invalidPatch(t, err)
			}
			return out, nil
		}
	case applyPatchType:
		o.applying = true
		return s.applyPatch(ctx, t, body, o)
	case strategicPatchType:
		schema := t.Kind.StrategicPatch
		if schema == nil {
			return Result{}, UnsupportedMediaType(customResourcePatchTypes)
		}
		if _, err := DecodeObject(body); err != nil {
			return Result{}, err
		}
		apply = func(doc []byte) ([]byte, error) {
			out, err := strategicpatch.StrategicMergePatch(doc, body, schema)
			if err != nil {
				return nil, invalidPatch(t, err)
			}
			return out, nil
		}
	default:
		return Result{}, UnsupportedMediaType(customResourcePatchTypes)
	}
	// After the body decoded (the decoder's own depth limit is a 400): +2 as a JSON Patch's list
	// of operations and each operation add two levels.
	if jsonDeeperThan(body, maxPatchDepth+2) {
		return Result{}, tooDeep(t, "the patch")
	}
	return s.update(ctx, t, o, func(cur map[string]any) (map[string]any, error) {
		if t.Sub == "scale" {
			return patchScale(t, deepCopy(cur), apply)
		}
		if err := checkDepth(t, cur, "the object"); err != nil {
			return nil, err
		}
		doc, err := jsonfast.Marshal(cur)
		if err != nil {
			return nil, err
		}
		out, err := apply(doc)
		if err != nil {
			return nil, err
		}
		if len(out) > s.maxPatchedBytes() {
			return nil, apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the patched object is %d bytes; the limit is %d", len(out), s.maxPatchedBytes()))
		}
		next, err := DecodeObject(out)
		if err != nil {
			return nil, invalidPatch(t, err)
		}
		return next, nil
	})
}

// applyPatch is server-side apply (ssa.go): the applied configuration creates the object when
// it is missing, and is otherwise merged with field ownership; a field another manager owns is
// a 409 unless force is set.
func (s *Store) applyPatch(ctx context.Context, t Target, body []byte, o Options) (Result, error) {
	if o.FieldManager == "" {
		return Result{}, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "PatchOptions"}, "",
			field.ErrorList{field.Required(field.NewPath("fieldManager"), "is required for apply patch")})
	}
	if t.Sub != "" {
		return Result{}, UnsupportedMediaType(jsonPatchType + ", " + mergePatchType)
	}
	if trimmed := bytes.TrimSpace(body); len(trimmed) > 0 && trimmed[0] == '{' && jsonDeeperThan(trimmed, maxPatchDepth) {
		// JSON (which is YAML too) is measured before the costly YAML conversion.
		return Result{}, tooDeep(t, "the applied configuration")
	}
	js, err := yaml.YAMLToJSON(body)
	if err != nil {
		return Result{}, badRequest("the body of the request is not valid YAML or JSON: %v", err)
	}
	applied, err := DecodeObject(js)
	if err != nil {
		return Result{}, err
	}
	if err := checkTypeMeta(t.Kind, applied); err != nil {
		return Result{}, err
	}
	if err := checkDepth(t, applied, "the applied configuration"); err != nil {
		return Result{}, err
	}
	if name := stringOf(metadataOf(applied)["name"]); name != t.Key.Name {
		return Result{}, badRequest("the name of the object (%s) does not match the name on the URL (%s)", name, t.Key.Name)
	}
	// Unknown fields leave the applied configuration before the merge, so no manager owns
	// them (and typed kinds' types, which do not know them, can read it).
	warnings, err := pruneUnknown(t, applied, o)
	if err != nil {
		return Result{}, err
	}
	var res Result
	if _, err = s.cfg.Storage.Get(ctx, t.Key); errors.Is(err, cache.ErrNotFound) {
		var obj map[string]any
		if obj, err = s.applyObject(t.Kind, nil, applied, o.FieldManager, o.Force); err != nil {
			return Result{}, err
		}
		res, err = s.Create(ctx, t, obj, o)
		res.Created = err == nil
		// Created meanwhile (by another apply, or through another replica whose write this
		// one's store had not seen yet): apply to it instead.
		if !errors.Is(err, cache.ErrAlreadyExists) {
			res.Warnings = append(warnings, res.Warnings...)
			return res, err
		}
	}
	res, err = s.update(ctx, t, o, func(cur map[string]any) (map[string]any, error) {
		if err := checkDepth(t, cur, "the live object"); err != nil {
			return nil, err
		}
		return s.applyObject(t.Kind, deepCopy(cur), deepCopy(applied), o.FieldManager, o.Force)
	})
	res.Warnings = append(warnings, res.Warnings...)
	return res, err
}

// invalidPatch is the 422 for a patch that cannot be applied (a failed test, a missing path).
func invalidPatch(t Target, err error) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: t.Kind.Group, Kind: t.Kind.Kind}, t.Key.Name,
		field.ErrorList{field.Invalid(field.NewPath(""), nil, fmt.Sprintf("the patch cannot be applied: %v", err))})
}

// jsonPath splits a Kubernetes JSONPath like ".spec.replicas" into its keys.
func jsonPath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

func setPath(obj map[string]any, path []string, v any) {
	m := obj
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// requireMembers checks what RFC 6902 requires and the JSON Patch library does not: add, replace
// and test carry a value; move and copy carry a from.
func requireMembers(p jsonpatch.Patch) error {
	for i, op := range p {
		member := ""
		switch op.Kind() {
		case "add", "replace", "test":
			member = "value"
		case "move", "copy":
			member = "from"
		}
		if _, ok := op[member]; member != "" && !ok {
			return fmt.Errorf("operation %d (%s) has no %q", i, op.Kind(), member)
		}
	}
	return nil
}
