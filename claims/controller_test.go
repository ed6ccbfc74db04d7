package claims_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/claims"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
)

func claimKey(name string) cache.Key {
	return cache.Key{Resource: "persistentvolumeclaims", Namespace: "team", Name: name}
}

func podKey(name string) cache.Key { return cache.Key{Resource: "pods", Namespace: "team", Name: name} }

func claim(name string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}
}

// pod is a pod mounting the claim named claim and, through an ephemeral volume "scratch", the
// claim <name>-scratch.
func pod(name, claim string) map[string]any {
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c", "image": "nginx"}},
			"volumes": []any{
				map[string]any{"name": "data", "persistentVolumeClaim": map[string]any{"claimName": claim}},
				map[string]any{"name": "scratch", "ephemeral": map[string]any{"volumeClaimTemplate": map[string]any{"spec": map[string]any{
					"accessModes": []any{"ReadWriteOnce"}, "resources": map[string]any{"requests": map[string]any{"storage": "1Gi"}}}}}},
			},
		}}
}

type rig struct {
	t      *testing.T
	client *registry.Client
}

// newRig runs a Controller over a fresh registry until the test ends.
func newRig(t *testing.T) *rig {
	env := registrytest.New(t, registrytest.Options{})
	ctrl, err := claims.New(claims.Config{Client: env.Registry.Client(claims.Name)})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = ctrl.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	env.Namespaces(t, "team")
	return &rig{t: t, client: env.Registry.Client("test")}
}

func (r *rig) create(key cache.Key, obj map[string]any) {
	r.t.Helper()
	_, err := r.client.Create(context.Background(), key, obj)
	require.NoError(r.t, err)
}

func (r *rig) delete(key cache.Key) {
	r.t.Helper()
	_, _, err := r.client.Delete(context.Background(), key, cache.Preconditions{})
	require.NoError(r.t, err)
}

// gone checks, once the controller has done all it would (every goroutine of the test's
// bubble blocked), that the object at key was removed.
func (r *rig) gone(key cache.Key, msg string) {
	r.t.Helper()
	synctest.Wait()
	_, err := r.client.Get(context.Background(), key)
	require.ErrorIs(r.t, err, cache.ErrNotFound, msg)
}

// TestClaimWaitsForItsPods: a deleted claim a pod uses stays, marked, with its finalizer, until
// the pod goes; a claim no pod uses goes at once.
func TestClaimWaitsForItsPods(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.create(claimKey("data"), claim("data"))
		r.create(claimKey("web-scratch"), claim("web-scratch"))
		r.create(claimKey("free"), claim("free"))
		r.create(podKey("web"), pod("web", "data"))
		got, err := r.client.Get(context.Background(), claimKey("data"))
		require.NoError(t, err)
		assert.Equal(t, []string{kinds.PVCProtectionFinalizer}, got.Finalizers(), "kube-apiserver's admission protects every new claim")

		r.delete(claimKey("free"))
		r.gone(claimKey("free"), "a claim no pod uses goes once deleted")

		r.delete(claimKey("data"))
		r.delete(claimKey("web-scratch"))
		synctest.Wait() // the controller has done all it would
		for _, name := range []string{"data", "web-scratch"} {
			got, err := r.client.Get(context.Background(), claimKey(name))
			require.NoError(t, err, "%s is in use: it stays", name)
			assert.True(t, got.Deleting(), name)
			assert.Equal(t, []string{kinds.PVCProtectionFinalizer}, got.Finalizers(), name)
		}

		r.delete(podKey("web"))
		r.gone(claimKey("data"), "the pod went: so does its claim")
		r.gone(claimKey("web-scratch"), "and its ephemeral volume's claim")
	})
}

// TestFinishedPodFreesClaim: a pod that finished holds its claim no longer.
func TestFinishedPodFreesClaim(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		r := newRig(t)
		r.create(claimKey("data"), claim("data"))
		r.create(podKey("job"), pod("job", "data"))
		r.delete(claimKey("data"))

		obj, err := r.client.Get(context.Background(), podKey("job"))
		require.NoError(t, err)
		m, err := obj.Decode()
		require.NoError(t, err)
		m["status"] = map[string]any{"phase": "Succeeded"}
		_, err = r.client.UpdateStatus(context.Background(), podKey("job"), m)
		require.NoError(t, err)
		r.gone(claimKey("data"), "the pod succeeded: its claim goes")
	})
}
