package webhooks

import (
	"encoding/json"
	"fmt"
	"strings"
)

// The write path's shortcuts of admission: a mutating handler that implements InPlace makes its
// changes to the object itself (Chain.Apply), and a patch of plain "add" and "replace"
// operations into existing objects is applied to the decoded object directly (applyInPlace)
// instead of encoding it for evanphx/json-patch and decoding the result.
// FuzzApplyInPlace holds applyInPlace to json-patch; FuzzDefaulterInPlace (package application)
// holds the built-in defaulter's HandleInPlace to its patch.

// applyInPlace applies ops to obj when every op is an "add" or "replace" of a plain JSON value
// (as decoded with UseNumber) at a path whose parent object exists in obj before the patch;
// otherwise it changes nothing and returns false. An op that an earlier op of the same patch
// made impossible is an error, as JSON Patch has it.
func applyInPlace(obj map[string]any, ops []PatchOperation) (bool, error) {
	for _, op := range ops {
		if (op.Op != "add" && op.Op != "replace") || !plainJSON(op.Value) {
			return false, nil
		}
		if _, _, ok := resolve(obj, op); !ok {
			return false, nil
		}
	}
	for _, op := range ops {
		parent, key, ok := resolve(obj, op)
		if !ok {
			return true, fmt.Errorf("%s %s: the path does not exist", op.Op, op.Path)
		}
		parent[key] = copyJSON(op.Value)
	}
	return true, nil
}

// resolve finds the object op.Path's last token is a key of.
func resolve(obj map[string]any, op PatchOperation) (map[string]any, string, bool) {
	tokens := strings.Split(op.Path, "/")
	if len(tokens) < 2 || tokens[0] != "" {
		return nil, "", false
	}
	parent := obj
	for _, t := range tokens[1 : len(tokens)-1] {
		next, ok := parent[unescapePointer(t)].(map[string]any)
		if !ok {
			return nil, "", false
		}
		parent = next
	}
	// A replace of a missing key sets it, as json-patch v4 (kube-apiserver's) has it.
	return parent, unescapePointer(tokens[len(tokens)-1]), true
}

// plainJSON reports whether v holds only what a JSON decoder with UseNumber produces.
func plainJSON(v any) bool {
	switch v := v.(type) {
	case nil, bool, string, json.Number:
		return true
	case []any:
		for _, e := range v {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	case map[string]any:
		for _, e := range v {
			if !plainJSON(e) {
				return false
			}
		}
		return true
	}
	return false
}

// copyJSON deep-copies a plain JSON value, so the object never shares it with the patch.
func copyJSON(v any) any {
	switch v := v.(type) {
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = copyJSON(e)
		}
		return out
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, e := range v {
			out[k] = copyJSON(e)
		}
		return out
	}
	return v
}

// unescapePointer undoes escapePointer (RFC 6901).
func unescapePointer(s string) string {
	if !strings.Contains(s, "~") {
		return s
	}
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
}
