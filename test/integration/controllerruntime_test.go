package integration

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// TestUnservedResourceToClients: a resource opemu does not serve reads as "not served" to real
// clients, not as a missing object: client-go's typed client gets kube-apiserver's generic 404,
// and controller-runtime's RESTMapper and client report "no matches for kind". The kinds asked
// for are ones SPEC §14 does not plan to serve.
func TestUnservedResourceToClients(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false")
	cfg := p.restConfig()
	ctx := context.Background()

	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	_, err = cs.CoreV1().PodTemplates("default").List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	assert.EqualError(t, err, "the server could not find the requested resource")
	var st apierrors.APIStatus
	require.ErrorAs(t, err, &st)
	assert.Empty(t, st.Status().Details.Kind, "no resource named, as for a missing object")
	_, err = cs.CoreV1().ResourceQuotas("default").Get(ctx, "x", metav1.GetOptions{})
	assert.EqualError(t, err, "the server could not find the requested resource")

	httpClient, err := rest.HTTPClientFor(cfg)
	require.NoError(t, err)
	mapper, err := apiutil.NewDynamicRESTMapper(cfg, httpClient)
	require.NoError(t, err)
	for _, gvk := range []schema.GroupVersionKind{
		{Version: "v1", Kind: "PodTemplate"},
		{Version: "v1", Kind: "ResourceQuota"},
	} {
		_, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		assert.True(t, meta.IsNoMatchError(err), "%s: %v", gvk, err)
		assert.ErrorContains(t, err, `no matches for kind "`+gvk.Kind+`"`)
	}
	m, err := mapper.RESTMapping(schema.GroupKind{Group: "cloudnative.elide.dev", Kind: "Application"}, "v1")
	require.NoError(t, err, "a served kind maps")
	assert.Equal(t, "applications", m.Resource.Resource)

	c, err := client.New(cfg, client.Options{HTTPClient: httpClient, Mapper: mapper})
	require.NoError(t, err)
	err = c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "x"}, &corev1.PodTemplate{})
	assert.True(t, meta.IsNoMatchError(err), "%v", err)
	err = c.List(ctx, &corev1.ResourceQuotaList{})
	assert.True(t, meta.IsNoMatchError(err), "%v", err)
}

// TestGenerateNameFromGoClients: the way envtest suites make their namespaces (controller-runtime's
// client and client-go's typed client, which sends protobuf) and a custom resource through the
// dynamic client, each named by generateName.
func TestGenerateNameFromGoClients(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false")
	cfg := p.restConfig()
	ctx := context.Background()

	c, err := client.New(cfg, client.Options{})
	require.NoError(t, err)
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "envtest-"}}
	require.NoError(t, c.Create(ctx, ns))
	assert.Regexp(t, `^envtest-[a-z0-9]{5}$`, ns.Name)
	require.NoError(t, c.Get(ctx, client.ObjectKeyFromObject(ns), &corev1.Namespace{}))

	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)
	typed, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "typed-"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Regexp(t, `^typed-[a-z0-9]{5}$`, typed.Name)
	assert.Equal(t, typed.Name, typed.Labels["kubernetes.io/metadata.name"])

	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	u := appObject("", 1)
	u.SetGenerateName("gen-")
	created, err := dyn.Resource(appsGVR).Namespace(typed.Name).Create(ctx, u, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Regexp(t, `^gen-[a-z0-9]{5}$`, created.GetName())
}
