package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/opemu/opemu/cache"
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

// patch applies a JSON Patch, a JSON merge patch or an apply patch to t's object (or its
// /status or /scale view) and runs the result through the update path.
func (s *Server) patch(ctx context.Context, t target, patchType string, body []byte, o writeOptions) (writeResult, bool, error) {
	if o.force && patchType != applyPatchType {
		return writeResult{}, false, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "PatchOptions"}, "",
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
			return writeResult{}, false, badRequest("the body of the request is not a valid JSON Patch: %v", err)
		}
		apply = func(doc []byte) ([]byte, error) {
			out, err := p.Apply(doc)
			if err != nil {
				return nil, invalidPatch(t, err)
			}
			return out, nil
		}
	case mergePatchType:
		if _, err := decodeJSONObject(body); err != nil {
			return writeResult{}, false, err
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
		schema := t.kind.StrategicPatch
		if schema == nil {
			return writeResult{}, false, unsupportedMediaType(customResourcePatchTypes)
		}
		if _, err := decodeJSONObject(body); err != nil {
			return writeResult{}, false, err
		}
		apply = func(doc []byte) ([]byte, error) {
			out, err := strategicpatch.StrategicMergePatch(doc, body, schema)
			if err != nil {
				return nil, invalidPatch(t, err)
			}
			return out, nil
		}
	default:
		return writeResult{}, false, unsupportedMediaType(customResourcePatchTypes)
	}
	res, err := s.update(ctx, t, o, func(cur map[string]any) (map[string]any, bool, error) {
		if t.sub == "scale" {
			return s.patchScale(t, cur, apply)
		}
		doc, err := json.Marshal(cur)
		if err != nil {
			return nil, false, err
		}
		out, err := apply(doc)
		if err != nil {
			return nil, false, err
		}
		next, err := decodeJSONObject(out)
		if err != nil {
			return nil, false, invalidPatch(t, err)
		}
		return next, stringOf(metadataOf(next)["resourceVersion"]) != stringOf(metadataOf(cur)["resourceVersion"]), nil
	})
	return res, false, err
}

// applyPatch is server-side apply (ssa.go): the applied configuration creates the object when
// it is missing, and is otherwise merged with field ownership; a field another manager owns is
// a 409 unless force is set.
func (s *Server) applyPatch(ctx context.Context, t target, body []byte, o writeOptions) (writeResult, bool, error) {
	if o.fieldManager == "" {
		return writeResult{}, false, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "PatchOptions"}, "",
			field.ErrorList{field.Required(field.NewPath("fieldManager"), "is required for apply patch")})
	}
	if t.sub != "" {
		return writeResult{}, false, unsupportedMediaType(jsonPatchType + ", " + mergePatchType)
	}
	js, err := yaml.YAMLToJSON(body)
	if err != nil {
		return writeResult{}, false, badRequest("the body of the request is not valid YAML or JSON: %v", err)
	}
	applied, err := decodeJSONObject(js)
	if err != nil {
		return writeResult{}, false, err
	}
	if err := checkTypeMeta(t.kind, applied); err != nil {
		return writeResult{}, false, err
	}
	if name := stringOf(metadataOf(applied)["name"]); name != t.key.Name {
		return writeResult{}, false, badRequest("the name of the object (%s) does not match the name on the URL (%s)", name, t.key.Name)
	}
	if _, err := s.cfg.Store.Get(ctx, t.key); errors.Is(err, cache.ErrNotFound) {
		obj, err := s.applyObject(t.kind, nil, applied, o.fieldManager, o.force)
		if err != nil {
			return writeResult{}, false, err
		}
		res, err := s.create(ctx, t, obj, o)
		return res, true, err
	}
	res, err := s.update(ctx, t, o, func(cur map[string]any) (map[string]any, bool, error) {
		next, err := s.applyObject(t.kind, cur, deepCopy(applied), o.fieldManager, o.force)
		if err != nil {
			return nil, false, err
		}
		return next, stringOf(metadataOf(next)["resourceVersion"]) != stringOf(metadataOf(cur)["resourceVersion"]), nil
	})
	return res, false, err
}

// invalidPatch is the 422 for a patch that cannot be applied (a failed test, a missing path).
func invalidPatch(t target, err error) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: t.kind.Group, Kind: t.kind.Kind}, t.key.Name,
		field.ErrorList{field.Invalid(field.NewPath(""), nil, fmt.Sprintf("the patch cannot be applied: %v", err))})
}

// jsonPath splits a Kubernetes JSONPath like ".spec.replicas" into its keys.
func jsonPath(p string) []string { return strings.Split(strings.TrimPrefix(p, "."), ".") }

func getPath(obj map[string]any, path []string) (any, bool) {
	var cur any = obj
	for _, k := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

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
