package server_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const applyType = "application/apply-patch+yaml"

const applied = `apiVersion: cloudnative.elide.dev/v1
kind: Application
metadata: {name: web}
spec:
  replicas: 3
  image: nginx:1.27
  config: {A: "1"}
`

func TestServerSideApply(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := appsPath + "/web"
	status(t, e.do("PATCH", path, applyType, applied), 422, "Invalid") // no fieldManager

	r := e.do("PATCH", path+"?fieldManager=alice", applyType, applied)
	require.Equal(t, http.StatusCreated, r.code, "apply creates a missing object: %s", r.body)
	obj := r.json(t)
	mf := field(obj, "metadata", "managedFields").([]any)
	require.Len(t, mf, 1)
	assert.Equal(t, "alice", mf[0].(map[string]any)["manager"])
	assert.Equal(t, "Apply", mf[0].(map[string]any)["operation"])

	// Another manager changes a field alice owns: an Update, recorded.
	require.Equal(t, http.StatusOK, e.do("PATCH", path+"?fieldManager=bob", "application/merge-patch+json", `{"spec":{"replicas":7}}`).code)
	// alice applies again: a conflict on spec.replicas, named.
	c := status(t, e.do("PATCH", path+"?fieldManager=alice", applyType, applied), 409, "Conflict")
	assert.Contains(t, c["message"], `conflict with "bob"`)
	assert.Contains(t, causes(c), ".spec.replicas")
	// With force, alice takes it back.
	f := e.do("PATCH", path+"?fieldManager=alice&force=true", applyType, applied)
	require.Equal(t, http.StatusOK, f.code, "body: %s", f.body)
	assert.EqualValues(t, 3, field(f.json(t), "spec", "replicas"))

	// A field alice stops applying goes.
	without := `apiVersion: cloudnative.elide.dev/v1
kind: Application
metadata: {name: web}
spec: {replicas: 3, image: nginx:1.27}
`
	g := e.do("PATCH", path+"?fieldManager=alice", applyType, without)
	require.Equal(t, http.StatusOK, g.code, "body: %s", g.body)
	assert.Nil(t, field(g.json(t), "spec", "config"))

	status(t, e.do("PATCH", path+"?fieldManager=alice", "application/merge-patch+json&force=true", `{}`), 415, "UnsupportedMediaType")
	status(t, e.do("PATCH", path+"?fieldManager=alice&force=true", "application/merge-patch+json", `{}`), 422, "Invalid")
}
