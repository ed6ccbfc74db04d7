package registry

import (
	"context"
	"fmt"
	"maps"
	"sync/atomic"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Limits that keep one patch from taking the server down (SPEC §4.2: every non-watch request
// is answered within 5 s). Each is documented in the README.
const (
	// maxJSONPatchOps is kube-apiserver's limit on the operations of one JSON Patch (413 beyond).
	maxJSONPatchOps = 10000
	// jsonPatchWork bounds a JSON Patch's operations times the size of the document it applies
	// to (413 beyond): one operation can cost a pass over the document (an insert into a long
	// array moves every element after it), so 3,000 inserts into a 1.8 MB list took 4.9 s.
	// Objects of the usual few KB get the full maxJSONPatchOps.
	jsonPatchWork = 128 << 20
	// maxPatchDepth bounds how deeply a patch, the object it applies to, and an object whose
	// fields are managed may nest (422 beyond). Patching and field management cost grows with
	// depth times size: a 9,000-deep 1 MB server-side apply took 16 s, a 9,000-deep merge patch
	// 6 s (the patch libraries re-encode every level). Creates and updates, which cost no more
	// than their size, take any depth the JSON decoder does. Kubernetes objects and CRD schemas
	// nest a few dozen levels.
	maxPatchDepth = 100
	// defaultMaxBody is Config.MaxBody when unset.
	defaultMaxBody = 3 << 20
	// maxManagedWidth bounds field management (server-side apply, and every write to an
	// object whose fields are managed): the maps and lists of the live object, and those of
	// the applied configuration or the object written over it, each hold at most as many
	// entries as one map of maxManagedWidth would, counting each map or list as its length
	// squared (413 beyond). structured-merge-diff inserts each
	// field into its parent's sorted set one at a time, which costs the square of the parent's
	// width, and cannot be stopped: applying a ConfigMap of 50,000 keys took 1.5 s of CPU, of
	// 100,000 keys 7.8 s, of 200,000 keys 34 s (kube-apiserver, which has no bound but its
	// request body limit, answers 504 after 34 s and carries on).
	maxManagedWidth = 20000
	// maxStrategicWidth bounds a strategic merge patch the same way, counting the lists of the
	// patch and of the object it patches (413 beyond): the patch library finds and orders each
	// item of a merged list by searching the list for it, so one item patched into a list of
	// 8,000 took 2.3 s of CPU, 8,000 into 8,000 3.4 s and 30,000 into 30,000 180 s, none of it
	// cancellable. Maps merge key by key and are not counted.
	maxStrategicWidth = 3000
)

// maxPatchedBytes is the largest object a patch may produce: twice the request body limit, so
// an object near the limit can still be patched but repeated patches cannot grow one without
// bound.
func (s *Store) maxPatchedBytes() int { return int(2 * s.cfg.MaxBody) }

// jsonPatchMaxCopyBytes bounds what a JSON Patch's copies may copy (422 beyond), as
// kube-apiserver's JSONPatchMaxCopyBytes does, at its default: each copy duplicates a subtree,
// so doubling copies turn a 2 KB patch into gigabytes. The JSON Patch library kube-apiserver
// uses (evanphx/json-patch v4, for patch requests and webhooks' patches) keeps this bound for
// the whole process: New sets it (boundJSONPatchCopies), as kube-apiserver's server config does.
const jsonPatchMaxCopyBytes = 3 << 20

// boundJSONPatchCopies raises the JSON Patch library's process-wide bound on copies to
// jsonPatchMaxCopyBytes unless it is set higher, as kube-apiserver's server config does. It
// writes only while the bound is lower, which is before the first registry patches anything:
// later registries of the same process (testenv's) find it set and only read it.
func boundJSONPatchCopies() {
	for {
		cur := atomic.LoadInt64(&jsonpatch.AccumulatedCopySizeLimit)
		if cur >= jsonPatchMaxCopyBytes || atomic.CompareAndSwapInt64(&jsonpatch.AccumulatedCopySizeLimit, cur, jsonPatchMaxCopyBytes) {
			return
		}
	}
}

// checkJSONPatchSize refuses a patch with too many operations for the document it applies to
// (docBytes 0: before the document is known).
func checkJSONPatchSize(ops, docBytes int) error {
	if ops > maxJSONPatchOps {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("The allowed maximum operations in a JSON patch is %d, got %d", maxJSONPatchOps, ops))
	}
	if docBytes > 0 && ops > 1 && ops*docBytes > jsonPatchWork {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
			"a JSON patch of %d operations on an object of %d bytes is too much work: at most %d operations on an object this size", ops, docBytes, max(1, jsonPatchWork/docBytes)))
	}
	return nil
}

// jsonDeeperThan reports whether the JSON text b nests objects and arrays more than limit
// deep, without decoding it.
func jsonDeeperThan(b []byte, limit int) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == '{' || c == '[':
			if depth++; depth > limit {
				return true
			}
		case c == '}' || c == ']':
			depth--
		}
	}
	return false
}

// nestedDeeperThan reports whether v (decoded JSON) nests maps and lists more than limit deep.
func nestedDeeperThan(v any, limit int) bool {
	if limit < 0 {
		return true
	}
	switch v := v.(type) {
	case map[string]any:
		for _, e := range v {
			if nestedDeeperThan(e, limit-1) {
				return true
			}
		}
	case []any:
		for _, e := range v {
			if nestedDeeperThan(e, limit-1) {
				return true
			}
		}
	}
	return false
}

// tooDeep is the 422 for a patch, or an object to patch or manage, nested deeper than
// maxPatchDepth.
func tooDeep(t Target, what string) error {
	return apierrors.NewInvalid(t.groupKind(), t.Key.Name,
		field.ErrorList{field.Invalid(field.NewPath(""), nil, fmt.Sprintf("%s nests more than %d levels deep, the most a patch or server-side apply handles", what, maxPatchDepth))})
}

// checkDepth refuses obj when it nests deeper than maxPatchDepth.
func checkDepth(t Target, obj map[string]any, what string) error {
	if nestedDeeperThan(obj, maxPatchDepth) {
		return tooDeep(t, what)
	}
	return nil
}

// squaredWidths is the sum of the squared lengths of the lists in v (decoded JSON) and, with
// maps, of its maps, or a number above limit once it exceeds limit.
func squaredWidths(v any, maps bool, limit int64) int64 {
	var sum int64
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			if maps {
				sum += int64(len(v)) * int64(len(v))
			}
			for _, e := range v {
				if sum > limit {
					return
				}
				walk(e)
			}
		case []any:
			sum += int64(len(v)) * int64(len(v))
			for _, e := range v {
				if sum > limit {
					return
				}
				walk(e)
			}
		}
	}
	walk(v)
	return sum
}

// checkManagedWidth refuses field management of obj (the live object, or what is written over
// it) wider than maxManagedWidth (413), what naming it.
func checkManagedWidth(what string, obj map[string]any) error {
	const limit = int64(maxManagedWidth) * maxManagedWidth
	if md, ok := obj["metadata"].(map[string]any); ok && md["managedFields"] != nil {
		// The field manager takes the managedFields out of the object before it walks it.
		obj, md = maps.Clone(obj), maps.Clone(md)
		delete(md, "managedFields")
		obj["metadata"] = md
	}
	if squaredWidths(obj, true, limit) > limit {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
			"%s is too wide for server-side field management: its maps and lists, each counted as its length squared, amount to more than one of %d entries", what, maxManagedWidth))
	}
	return nil
}

// checkStrategicWidth refuses a strategic merge patch whose lists and those of the object it
// patches amount to more than one list of maxStrategicWidth items (413).
func checkStrategicWidth(patch, doc map[string]any) error {
	const limit = int64(maxStrategicWidth) * maxStrategicWidth
	if squaredWidths(patch, false, limit)+squaredWidths(doc, false, limit) > limit {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
			"the strategic merge patch and the object it patches are too wide to merge: their lists, each counted as its length squared, amount to more than one of %d items", maxStrategicWidth))
	}
	return nil
}

// beforeCommit is checked just before a write reaches the store: work that overran the
// request's deadline is not committed after the client was told it failed (504).
func beforeCommit(ctx context.Context) error {
	if ctx.Err() != nil {
		return apierrors.NewTimeoutError(fmt.Sprintf("request did not complete within requested timeout - %v", context.Cause(ctx)), 0)
	}
	return nil
}
