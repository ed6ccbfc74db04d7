package server

import (
	"strconv"

	"k8s.io/apimachinery/pkg/types"

	"github.com/google/uuid"
)

func metadataOf(obj map[string]any) map[string]any {
	md, ok := obj["metadata"].(map[string]any)
	if !ok {
		md = map[string]any{}
		obj["metadata"] = md
	}
	return md
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

func formatRV(rv uint64) string { return strconv.FormatUint(rv, 10) }

func newUID() string { return uuid.NewString() }

// deepCopy copies a decoded JSON value so the copy can be modified freely.
func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = deepCopyValue(v)
	}
	return out
}

func deepCopyValue(v any) any {
	switch v := v.(type) {
	case map[string]any:
		return deepCopy(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = deepCopyValue(e)
		}
		return out
	}
	return v
}

func apiUID(s string) types.UID { return types.UID(s) }
