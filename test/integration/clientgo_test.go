package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

var appsGVR = schema.GroupVersionResource{Group: "cloudnative.elide.dev", Version: "v1", Resource: "applications"}

// listCounter counts the LIST requests a client sends for Applications (relists).
type listCounter struct {
	next  http.RoundTripper
	lists atomic.Int32
}

func (l *listCounter) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && r.URL.Query().Get("watch") == "" && r.URL.Path == "/apis/cloudnative.elide.dev/v1/namespaces/default/applications" {
		l.lists.Add(1)
	}
	return l.next.RoundTrip(r)
}

func appObject(name string, replicas int64) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cloudnative.elide.dev/v1", "kind": "Application",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"replicas": replicas, "image": "nginx:1.27"},
	}}
}

// TestClientGoInformer runs a dynamic informer while four writers create, update and delete
// Applications; it must converge to the server's state with at most one LIST. It runs twice:
// with client-go's watch-list (its default) and, in a child process, without it.
func TestClientGoInformer(t *testing.T) {
	t.Parallel()
	if os.Getenv("OPEMU_WATCHLIST_CHILD") == "" {
		t.Run("watch-list off", func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(os.Args[0], "-test.run=^TestClientGoInformer$", "-test.v")
			cmd.Env = append(os.Environ(), "OPEMU_WATCHLIST_CHILD=1", "KUBE_FEATURE_WatchListClient=false")
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "child run:\n%s", out)
			assert.Contains(t, string(out), "--- PASS: TestClientGoInformer")
		})
	}
	p := start(t, "ENABLE_CONTROLLER=false")
	cfg := p.restConfig()
	counter := &listCounter{}
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper { counter.next = rt; return counter }
	dyn, err := dynamic.NewForConfig(cfg)
	require.NoError(t, err)
	writer, err := dynamic.NewForConfig(p.restConfig())
	require.NoError(t, err)
	apps := writer.Resource(appsGVR).Namespace("default")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := range 10 {
		_, err := apps.Create(ctx, appObject(fmt.Sprint("seed-", i), 1), metav1.CreateOptions{})
		require.NoError(t, err)
	}

	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, "default", nil)
	inf := factory.ForResource(appsGVR).Informer()
	factory.Start(ctx.Done())

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 25 {
				name := fmt.Sprintf("w%d-%d", w, i)
				if _, err := apps.Create(ctx, appObject(name, 1), metav1.CreateOptions{}); err != nil {
					t.Error(err)
					return
				}
				obj, err := apps.Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					t.Error(err)
					return
				}
				_ = unstructured.SetNestedField(obj.Object, int64(i%5+2), "spec", "replicas")
				if _, err := apps.Update(ctx, obj, metav1.UpdateOptions{}); err != nil {
					t.Error(err)
					return
				}
				if i%3 == 0 {
					if err := apps.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
						t.Error(err)
						return
					}
				}
			}
		})
	}
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	wg.Wait()

	want, err := apps.List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	wantRV := map[string]string{}
	for _, it := range want.Items {
		wantRV[it.GetName()] = it.GetResourceVersion()
	}
	require.Eventually(t, func() bool {
		got := map[string]string{}
		for _, o := range inf.GetStore().List() {
			u := o.(*unstructured.Unstructured)
			got[u.GetName()] = u.GetResourceVersion()
		}
		return assert.ObjectsAreEqual(wantRV, got)
	}, 10*time.Second, 20*time.Millisecond, "the informer converges to the server's state")
	assert.LessOrEqual(t, counter.lists.Load(), int32(1), "at most one LIST")
	t.Logf("watch-list feature env=%q, LIST requests: %d", os.Getenv("KUBE_FEATURE_WatchListClient"), counter.lists.Load())
}

// TestClientGoLeaderElection runs two client-go candidates with a LeaseLock on the default
// clientset, which sends Leases as protobuf.
func TestClientGoLeaderElection(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false")
	cs, err := kubernetes.NewForConfig(p.restConfig())
	require.NoError(t, err)
	type cand struct {
		leading atomic.Bool
		cancel  context.CancelFunc
		done    chan struct{}
	}
	run := func(id string) *cand {
		c := &cand{done: make(chan struct{})}
		ctx, cancel := context.WithCancel(context.Background())
		c.cancel = cancel
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Name: "clientgo-test", Namespace: "default"},
				Client:     cs.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: id},
			},
			LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 250 * time.Millisecond,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) { c.leading.Store(true); <-ctx.Done(); c.leading.Store(false) },
				OnStoppedLeading: func() { c.leading.Store(false) },
			},
		})
		require.NoError(t, err)
		go func() { le.Run(ctx); close(c.done) }()
		return c
	}
	a := run("a")
	require.Eventually(t, a.leading.Load, 5*time.Second, 10*time.Millisecond)
	b := run("b")
	time.Sleep(time.Second) // b must stay a follower while a renews
	assert.False(t, b.leading.Load())
	a.cancel()
	<-a.done
	require.Eventually(t, b.leading.Load, 3*time.Second, 10*time.Millisecond, "b takes over after a releases")
	lease, err := cs.CoordinationV1().Leases("default").Get(context.Background(), "clientgo-test", metav1.GetOptions{})
	require.NoError(t, err)
	assert.Equal(t, "b", *lease.Spec.HolderIdentity)
	assert.Equal(t, int32(1), *lease.Spec.LeaseTransitions)
	b.cancel()
	<-b.done
}

// TestClientGoLeaseInformer syncs a typed Lease informer and sees a Lease created afterwards.
func TestClientGoLeaseInformer(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false")
	cs, err := kubernetes.NewForConfig(p.restConfig())
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	leases := factory.Coordination().V1().Leases()
	inf := leases.Informer()
	factory.Start(ctx.Done())
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))
	holder := "me"
	_, err = cs.CoordinationV1().Leases("default").Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "typed"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		l, err := leases.Lister().Leases("default").Get("typed")
		return err == nil && *l.Spec.HolderIdentity == "me"
	}, 5*time.Second, 10*time.Millisecond)
}
