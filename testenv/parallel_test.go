package testenv_test

import (
	"fmt"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/opemu/opemu/testenv"
)

// TestManyEnvironmentsInParallel: 50 environments in parallel tests of one process, each with
// its own port and state (the same names written with different contents, a CRD installed in
// some only, opemu's controller running in some); once their tests are done (New stops them in
// t.Cleanup) no goroutine of theirs is left and nothing listens on their ports any more.
//
// Not parallel itself: the goroutine check compares against the goroutines that ran before it
// started, which parallel tests would add to.
func TestManyEnvironmentsInParallel(t *testing.T) {
	const n = 50
	before := goleak.IgnoreCurrent()
	var mu sync.Mutex
	hosts := map[string]int{}
	t.Run("group", func(t *testing.T) {
		for i := range n {
			t.Run(strconv.Itoa(i), func(t *testing.T) {
				t.Parallel()
				opts := testenv.Options{Controller: i%5 == 0}
				withCRD := i%2 == 0
				if withCRD {
					opts.CRDs = []*apiextensionsv1.CustomResourceDefinition{thingsCRD()}
				}
				env := testenv.New(t, opts)
				mu.Lock()
				prev, dup := hosts[env.Config.Host]
				hosts[env.Config.Host] = i
				mu.Unlock()
				require.False(t, dup, "environment %d has the address of environment %d", i, prev)
				checkOwnState(t, env, i, withCRD)
			})
		}
	})
	require.Len(t, hosts, n)
	// Every environment has stopped (t.Cleanup of each subtest has run).
	goleak.VerifyNone(t, before)
	for host := range hosts {
		assertClosed(t, host)
	}
}

// checkOwnState writes into env what only environment i writes, and reads back only that.
func checkOwnState(t *testing.T, env *testenv.Environment, i int, withCRD bool) {
	t.Helper()
	ctx := t.Context()
	cs, err := kubernetes.NewForConfig(env.Config)
	require.NoError(t, err)
	mine := fmt.Sprint(i)
	_, err = cs.CoreV1().ConfigMaps("default").Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "state"},
		Data:       map[string]string{"env": mine},
	}, metav1.CreateOptions{})
	require.NoError(t, err, "the same name in every environment")
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-" + mine}}, metav1.CreateOptions{})
	require.NoError(t, err)

	list, err := cs.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	require.Len(t, list.Items, 1, "only this environment's objects")
	assert.Equal(t, mine, list.Items[0].Data["env"])
	nss, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	var names []string
	for _, ns := range nss.Items {
		names = append(names, ns.Name)
	}
	assert.ElementsMatch(t, []string{"default", "kube-system", "kube-public", "kube-node-lease", "ns-" + mine}, names)

	dyn, err := dynamic.NewForConfig(env.Config)
	require.NoError(t, err)
	thing := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.org/v1", "kind": "Thing", "metadata": map[string]any{"name": "t"}}}
	_, err = dyn.Resource(thingsGVR).Namespace("default").Create(ctx, thing, metav1.CreateOptions{})
	if withCRD {
		assert.NoError(t, err)
	} else {
		assert.Error(t, err, "Things are served only where their CRD was installed")
	}
}
