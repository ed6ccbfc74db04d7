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

// managerEntry returns obj's managedFields entry of manager, or nil.
func managerEntry(obj map[string]any, manager string) map[string]any {
	mf, _ := field(obj, "metadata", "managedFields").([]any)
	for _, e := range mf {
		if m, _ := e.(map[string]any); m["manager"] == manager {
			return m
		}
	}
	return nil
}

// Server-side apply on /scale and /status, as kube-apiserver does it: the scale subresource
// sees who owns the replicas (a conflict with the manager that set them, a forced apply takes
// them over, recorded on the object with subresource scale), /status changes status alone.
func TestServerSideApplySubresources(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := "/apis/apps/v1/namespaces/default/deployments/web"
	deployment := `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx}]}
`
	require.Equal(t, http.StatusCreated, e.do("PATCH", path+"?fieldManager=alice", applyType, deployment).code)

	scale := `{"apiVersion":"autoscaling/v1","kind":"Scale","metadata":{"name":"web"},"spec":{"replicas":5}}`
	c := status(t, e.do("PATCH", path+"/scale?fieldManager=hpa", applyType, scale), 409, "Conflict")
	assert.Contains(t, c["message"], `conflict with "alice"`)
	assert.Equal(t, []string{".spec.replicas"}, causes(c))

	r := e.do("PATCH", path+"/scale?fieldManager=hpa&force=true", applyType, scale)
	require.Equal(t, http.StatusOK, r.code, "body: %s", r.body)
	assert.EqualValues(t, 5, field(r.json(t), "spec", "replicas"))
	got := e.do("GET", path, "", "").json(t)
	assert.EqualValues(t, 5, field(got, "spec", "replicas"))
	hpa := managerEntry(got, "hpa")
	require.NotNil(t, hpa, "the scale's manager is recorded on the object")
	assert.Equal(t, "scale", hpa["subresource"])
	assert.Equal(t, "apps/v1", hpa["apiVersion"])
	assert.Equal(t, map[string]any{"f:spec": map[string]any{"f:replicas": map[string]any{}}}, hpa["fieldsV1"])
	assert.Nil(t, field(managerEntry(got, "alice"), "fieldsV1", "f:spec", "f:replicas"), "alice no longer owns the replicas")

	st := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},"spec":{"replicas":9},"status":{"observedGeneration":1,"replicas":1}}`
	r = e.do("PATCH", path+"/status?fieldManager=ctrl", applyType, st)
	require.Equal(t, http.StatusOK, r.code, "body: %s", r.body)
	obj := r.json(t)
	assert.EqualValues(t, 5, field(obj, "spec", "replicas"), "/status does not change the spec")
	assert.EqualValues(t, 1, field(obj, "status", "observedGeneration"))
	ctrl := managerEntry(obj, "ctrl")
	require.NotNil(t, ctrl)
	assert.Equal(t, "status", ctrl["subresource"])
	assert.Nil(t, field(ctrl, "fieldsV1", "f:spec"), "what /status resets is not owned")

	// A plain write to /status of a tracked object is recorded too, with its subresource.
	r = e.do("PATCH", path+"/status?fieldManager=patcher", "application/merge-patch+json", `{"status":{"availableReplicas":1}}`)
	require.Equal(t, http.StatusOK, r.code, "body: %s", r.body)
	patcher := managerEntry(r.json(t), "patcher")
	require.NotNil(t, patcher)
	assert.Equal(t, "Update", patcher["operation"])
	assert.Equal(t, "status", patcher["subresource"])
	assert.NotNil(t, field(patcher, "fieldsV1", "f:status", "f:availableReplicas"))

	status(t, e.do("PATCH", "/apis/apps/v1/namespaces/default/deployments/missing/status?fieldManager=ctrl", applyType,
		`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"missing"},"status":{"replicas":1}}`), 404, "NotFound")
}
