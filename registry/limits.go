package registry

import (
	"context"
	"fmt"
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

// beforeCommit is checked just before a write reaches the store: work that overran the
// request's deadline is not committed after the client was told it failed (504).
func beforeCommit(ctx context.Context) error {
	if ctx.Err() != nil {
		return apierrors.NewTimeoutError(fmt.Sprintf("request did not complete within requested timeout - %v", context.Cause(ctx)), 0)
	}
	return nil
}
