package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// pomAccept asks for metadata only, as controller-runtime's metadata client does.
const (
	pomAccept     = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
	pomListAccept = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
	protobufType  = "application/vnd.kubernetes.protobuf"
)

// TestNegotiation: answers take the media type and the kind the Accept header asks for (YAML,
// protobuf for built-in kinds, PartialObjectMetadata and its list), as kube-apiserver's
// negotiation picks them; an Accept header no answer meets is a 406, and errors come in the
// media type negotiated.
func TestNegotiation(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	cms := "/api/v1/namespaces/default/configmaps"
	require.Equal(t, http.StatusCreated, e.do("POST", cms, "application/json", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"neg","labels":{"a":"b"}},"data":{"k":"v"}}`).code)
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("neg", 1, "nginx:1")).code)

	t.Run("yaml", func(t *testing.T) {
		r := e.doAccept("GET", cms+"/neg", "application/yaml")
		require.Equal(t, http.StatusOK, r.code, "body: %s", r.body)
		assert.Equal(t, "application/yaml", r.header.Get("Content-Type"))
		var cm corev1.ConfigMap
		require.NoError(t, yaml.UnmarshalStrict(r.body, &cm), "body: %s", r.body)
		assert.Equal(t, "neg", cm.Name)
		assert.Equal(t, map[string]string{"k": "v"}, cm.Data)
	})
	t.Run("protobuf of a built-in kind", func(t *testing.T) {
		r := e.doAccept("GET", cms+"/neg", protobufType)
		require.Equal(t, http.StatusOK, r.code, "body: %s", r.body)
		assert.Equal(t, protobufType, r.header.Get("Content-Type"))
		obj, _, err := protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme).Decode(r.body, nil, nil)
		require.NoError(t, err)
		cm, ok := obj.(*corev1.ConfigMap)
		require.True(t, ok, "decoded a %T", obj)
		assert.Equal(t, "neg", cm.Name)
		assert.Equal(t, "v", cm.Data["k"])
	})
	t.Run("protobuf of a custom resource falls back to JSON", func(t *testing.T) {
		r := e.doAccept("GET", appsPath+"/neg", protobufType+",application/json")
		require.Equal(t, http.StatusOK, r.code, "body: %s", r.body)
		assert.Equal(t, "application/json", r.header.Get("Content-Type"))
	})
	for _, tt := range []struct{ name, path, accept, message string }{
		{"protobuf only, custom resource", appsPath + "/neg", protobufType, "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf"},
		{"html", cms + "/neg", "text/html", "only the following media types are accepted"},
		{"unknown as", cms + "/neg", "application/json;as=Frob;g=meta.k8s.io;v=v1", "only the following media types are accepted"},
		{"object as a list", cms + "/neg", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", "is not a list (*core.ConfigMap)"},
		{"list as an object", cms, "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1", "is a list (*core.ConfigMapList)"},
		{"YAML watch", cms + "?watch=true", "application/yaml", "application/json;stream=watch"},
	} {
		t.Run("406 "+tt.name, func(t *testing.T) {
			r := e.doAccept("GET", tt.path, tt.accept)
			st := decodeStatus(t, r)
			assert.Equal(t, http.StatusNotAcceptable, r.code)
			assert.EqualValues(t, http.StatusNotAcceptable, st.Code)
			assert.Equal(t, metav1.StatusReasonNotAcceptable, st.Reason)
			assert.Contains(t, st.Message, tt.message)
		})
	}
	t.Run("errors in the negotiated media type", func(t *testing.T) {
		r := e.doAccept("GET", cms+"/missing", "application/yaml")
		require.Equal(t, http.StatusNotFound, r.code)
		assert.Equal(t, "application/yaml", r.header.Get("Content-Type"))
		assert.Equal(t, metav1.StatusReasonNotFound, decodeStatus(t, r).Reason)
	})
	t.Run("PartialObjectMetadata", func(t *testing.T) {
		for _, path := range []string{cms + "/neg", appsPath + "/neg"} {
			r := e.doAccept("GET", path, pomAccept)
			require.Equal(t, http.StatusOK, r.code, "body: %s", r.body)
			m := r.json(t)
			assert.Equal(t, "meta.k8s.io/v1", m["apiVersion"], path)
			assert.Equal(t, "PartialObjectMetadata", m["kind"], path)
			assert.Equal(t, "neg", m["metadata"].(map[string]any)["name"], path)
			assert.NotContains(t, m, "data", path)
			assert.NotContains(t, m, "spec", path)
		}
	})
	t.Run("PartialObjectMetadataList", func(t *testing.T) {
		r := e.doAccept("GET", cms, pomListAccept)
		require.Equal(t, http.StatusOK, r.code, "body: %s", r.body)
		var list metav1.PartialObjectMetadataList
		require.NoError(t, json.Unmarshal(r.body, &list))
		assert.Equal(t, "PartialObjectMetadataList", list.Kind)
		require.Len(t, list.Items, 1)
		assert.Equal(t, "neg", list.Items[0].Name)
		assert.Equal(t, "PartialObjectMetadata", list.Items[0].Kind)
		assert.NotContains(t, string(r.body), `"data"`)
	})
	t.Run("built-in list items carry no apiVersion and kind", func(t *testing.T) {
		m := e.doAccept("GET", cms, "application/json").json(t)
		assert.Equal(t, "ConfigMapList", m["kind"])
		items := m["items"].([]any)
		require.Len(t, items, 1)
		assert.NotContains(t, items[0], "apiVersion")
		assert.NotContains(t, items[0], "kind")
		apps := e.doAccept("GET", appsPath, "application/json").json(t)
		assert.Equal(t, "Application", apps["items"].([]any)[0].(map[string]any)["kind"], "a custom resource's items keep theirs")
	})
	t.Run("metadata-only watch", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, "GET", e.http.URL+cms+"?watch=true", nil)
		require.NoError(t, err)
		req.Header.Set("Accept", "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1")
		resp, err := e.http.Client().Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
		require.NoError(t, err)
		var ev struct {
			Type   string                       `json:"type"`
			Object metav1.PartialObjectMetadata `json:"object"`
		}
		require.NoError(t, json.Unmarshal(line, &ev), "event: %s", line)
		assert.Equal(t, "ADDED", ev.Type)
		assert.Equal(t, "PartialObjectMetadata", ev.Object.Kind)
		assert.Equal(t, "neg", ev.Object.Name)
		assert.NotContains(t, string(line), `"data"`)
	})
}

// decodeStatus decodes the Status of an error answer in its Content-Type (JSON, YAML or
// protobuf: errors come in the media type negotiated without a transform).
func decodeStatus(t *testing.T, r response) metav1.Status {
	t.Helper()
	var st metav1.Status
	switch ct := r.header.Get("Content-Type"); ct {
	case protobufType:
		obj, _, err := protobuf.NewSerializer(clientgoscheme.Scheme, clientgoscheme.Scheme).Decode(r.body, nil, nil)
		require.NoError(t, err)
		s, ok := obj.(*metav1.Status)
		require.True(t, ok, "decoded a %T", obj)
		st = *s
	case "application/yaml":
		require.NoError(t, yaml.Unmarshal(r.body, &st), "body: %s", r.body)
	default:
		assert.Equal(t, "application/json", ct)
		require.NoError(t, json.Unmarshal(r.body, &st), "body: %s", r.body)
	}
	assert.Equal(t, "Status", st.Kind)
	return st
}
