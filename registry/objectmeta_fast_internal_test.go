package registry

import (
	"encoding/json"
	"testing"

	"github.com/opemu/opemu/kinds"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
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

// FuzzMetaQuicklyValid: metadata the quick check passes is metadata apimachinery reads and
// validates without an error, for a namespaced kind and a cluster-scoped one alike.
func FuzzMetaQuicklyValid(f *testing.F) {
	for _, seed := range []string{
		`{"name":"web","namespace":"default","uid":"u","resourceVersion":"1","generation":1,"creationTimestamp":"2026-11-24T08:00:00Z","labels":{"app.kubernetes.io/managed-by":"elide-operator"},"annotations":{"elide.dev/webhook-mutated":"true"}}`,
		`{"name":"Web","namespace":"default"}`,
		`{"name":"web","namespace":"a.b"}`,
		`{"name":"web","generation":-1}`,
		`{"name":"web","annotations":{"A/b":"x","a":""}}`,
		`{"name":"web","labels":{"a":"-x"}}`,
		`{"name":"web","creationTimestamp":"2026-13-24T08:00:00Z"}`,
		`{"name":"web","managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"v1","time":"2026-11-24T08:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:data":{}}}]}`,
		`{"name":"web","managedFields":[{"manager":"kubectl","operation":"Apply","subresource":"status","fieldsV1":{}}]}`,
		`{"name":"web","managedFields":[{"manager":"kubectl","operation":"Patch"}]}`,
		`{"name":"web","managedFields":[{"manager":"a\u0000b","operation":"Update"}]}`,
		`{"name":"web","managedFields":[{"manager":"kubectl"}]}`,
		`{"name":"web","finalizers":["cloudnative.elide.dev/finalizer","orphan"]}`,
		`{"name":"web","finalizers":["orphan","foregroundDeletion"]}`,
		`{"name":"web","finalizers":["-a/b",""]}`,
	} {
		f.Add(seed, true)
		f.Add(seed, false)
	}
	f.Fuzz(func(t *testing.T, raw string, namespaced bool) {
		md, err := DecodeObject([]byte(raw))
		if err != nil || !metaQuicklyValid(md, namespaced) {
			return
		}
		meta, err := objectMetaOf(md)
		require.NoError(t, err, "passed quickly, but not read: %s", raw)
		errs := apivalidation.ValidateObjectMeta(&meta, namespaced, kinds.NameIsDNSSubdomain, field.NewPath("metadata"))
		require.Empty(t, errs, "passed quickly: %s", raw)
	})
}

func TestMetaQuicklyValid(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		md         string
		namespaced bool
		want       bool
	}{
		{`{"name":"web","namespace":"default","uid":"u","generation":1,"creationTimestamp":"2026-11-24T08:00:00Z","labels":{"a":"b"},"annotations":{"x/y":"z"}}`, true, true},
		{`{"name":"web"}`, false, true},
		{`{"name":"web"}`, true, false},
		{`{"name":"web","namespace":"default"}`, false, false},
		{`{"name":"web","namespace":"default","finalizers":["a/b","kubernetes"]}`, true, true},
		{`{"name":"web","namespace":"default","finalizers":["orphan","foregroundDeletion"]}`, true, false},
		{`{"name":"web","namespace":"default","finalizers":["a b"]}`, true, false},
		{`{"name":"web","namespace":"default","finalizers":[1]}`, true, false},
		{`{"name":"web","namespace":"default","finalizers":"a/b"}`, true, false},
		{`{"name":"web","namespace":"default","generateName":"w-"}`, true, false},
		{`{"name":"web","namespace":"default","labels":{"a":1}}`, true, false},
	} {
		md, err := DecodeObject([]byte(tc.md))
		require.NoError(t, err)
		assert.Equal(t, tc.want, metaQuicklyValid(md, tc.namespaced), "%s namespaced=%v", tc.md, tc.namespaced)
	}
}
