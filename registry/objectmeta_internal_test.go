package registry

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzObjectMeta: whenever metadata is read directly, the result is what the JSON round trip
// into ObjectMeta gives.
func FuzzObjectMeta(f *testing.F) {
	f.Fuzz(func(t *testing.T, raw []byte) {
		md, err := DecodeObject(raw)
		if err != nil {
			return
		}
		direct, ok := simpleObjectMeta(md)
		if !ok {
			return
		}
		b, err := json.Marshal(md)
		require.NoError(t, err)
		var viaJSON metav1.ObjectMeta
		require.NoError(t, json.Unmarshal(b, &viaJSON), "read directly, but the round trip fails: %s", b)
		require.Equal(t, viaJSON, direct, "metadata %s", b)
	})
}
