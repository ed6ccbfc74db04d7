package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/stretchr/testify/require"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	cachev1alpha1 "github.com/opemu/opemu/examples/memcached-operator/api/v1alpha1"
	"github.com/opemu/opemu/testenv"
)

// The operator run as its ServiceAccount, with RBAC on, as a cluster runs it: with the Role
// kubebuilder generates from the controller's markers (config/rbac/role.yaml) it works; with one
// rule removed it logs kube-apiserver's forbidden for what that rule allowed.

// It runs on an environment of its own (testenv.Options.RBAC), also when the suite runs on an
// existing cluster.
func TestManagerAsServiceAccount(t *testing.T) {
	t.Parallel()
	t.Run("generated role", func(t *testing.T) {
		t.Parallel()
		runAsServiceAccount(t, func(*rbacv1.ClusterRole) {})
	})
	t.Run("without creating deployments", func(t *testing.T) {
		t.Parallel()
		logs := runAsServiceAccount(t, func(r *rbacv1.ClusterRole) {
			for i, rule := range r.Rules {
				if slices.Contains(rule.Resources, "deployments") {
					r.Rules[i].Verbs = slices.DeleteFunc(slices.Clone(rule.Verbs), func(v string) bool { return v == "create" })
				}
			}
		})
		require.Eventually(t, func() bool {
			return strings.Contains(logs.String(), `deployments.apps is forbidden: User \"system:serviceaccount:memcached-system:memcached-operator\" cannot create resource \"deployments\" in API group \"apps\" in the namespace \"cache\"`)
		}, wait, 10*time.Millisecond, "no forbidden in the manager's log:\n%s", logs)
	})
}

// runAsServiceAccount starts an environment with RBAC, binds config/rbac/role.yaml (changed by
// edit) to the ServiceAccount memcached-system/memcached-operator, runs the manager with that
// ServiceAccount's token, and creates a Memcached in namespace cache. With the role unchanged
// it waits for the Deployment; either way it returns the manager's log.
func runAsServiceAccount(t *testing.T, edit func(*rbacv1.ClusterRole)) *logBuffer {
	t.Helper()
	var role rbacv1.ClusterRole
	_, logs := runManager(t, func(_ *testenv.Environment, admin *kubernetes.Clientset) {
		role = bindMarkers(t, admin, edit)
	}, func() bool {
		return slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Contains(r.Resources, "deployments") && slices.Contains(r.Verbs, "create")
		})
	})
	return logs
}

// bindMarkers creates config/rbac/role.yaml (changed by edit) and binds it to the
// ServiceAccount memcached-system/memcached-operator; it returns the role created.
func bindMarkers(t *testing.T, admin *kubernetes.Clientset, edit func(*rbacv1.ClusterRole)) rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("config", "rbac", "role.yaml"))
	require.NoError(t, err)
	var role rbacv1.ClusterRole
	require.NoError(t, yaml.Unmarshal(raw, &role))
	edit(&role)
	_, err = admin.RbacV1().ClusterRoles().Create(t.Context(), &role, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().ClusterRoleBindings().Create(t.Context(), &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "manager-rolebinding"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "memcached-operator", Namespace: "memcached-system"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return role
}

// serviceAccount is the user the manager runs as in runManager.
const serviceAccount = "system:serviceaccount:memcached-system:memcached-operator"

// runManager starts an environment with RBAC, lets grant give the ServiceAccount
// memcached-system/memcached-operator its rights, runs the manager with that ServiceAccount's
// token, and creates a Memcached in namespace cache. When works says the rights allow it, it
// waits for the Deployment; either way it returns the environment and the manager's log.
func runManager(t *testing.T, grant func(*testenv.Environment, *kubernetes.Clientset), works func() bool) (*testenv.Environment, *logBuffer) {
	t.Helper()
	env := testenv.New(t, testenv.Options{RBAC: true, CRDDirectoryPaths: crdPaths, ErrorIfCRDPathMissing: true})
	admin := kubernetes.NewForConfigOrDie(env.Config)
	ctx := t.Context()
	for _, ns := range []string{"memcached-system", "cache"} {
		_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := admin.CoreV1().ServiceAccounts("memcached-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "memcached-operator"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	grant(env, admin)
	tr, err := admin.CoreV1().ServiceAccounts("memcached-system").CreateToken(ctx, "memcached-operator", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	saCfg := rest.AnonymousClientConfig(env.Config)
	saCfg.BearerToken = tr.Status.Token

	logs := &logBuffer{}
	mgr, err := newManager(saCfg, options{MetricsAddr: "0", ProbeAddr: "0", SecondManager: true,
		Logger: funcr.New(func(prefix, args string) { logs.add(prefix + " " + args) }, funcr.Options{})})
	require.NoError(t, err)
	mctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})

	c, err := client.New(env.Config, client.Options{Scheme: mgr.GetScheme()})
	require.NoError(t, err)
	m := &cachev1alpha1.Memcached{ObjectMeta: metav1.ObjectMeta{Name: "cache", Namespace: "cache"},
		Spec: cachev1alpha1.MemcachedSpec{Size: ptr.To[int32](2), ContainerPort: cachev1alpha1.DefaultContainerPort}}
	require.NoError(t, c.Create(ctx, m))
	if works() {
		dep := &appsv1.Deployment{}
		require.Eventually(t, func() bool {
			err := c.Get(ctx, client.ObjectKeyFromObject(m), dep)
			return err == nil && dep.Spec.Replicas != nil && *dep.Spec.Replicas == 2
		}, wait, 10*time.Millisecond, "no Deployment; the manager's log:\n%s", logs)
		require.NotContains(t, logs.String(), "forbidden")
	}
	return env, logs
}

// logBuffer is a manager's log, written by its goroutines.
type logBuffer struct {
	mu    sync.Mutex
	lines []string
}

func (b *logBuffer) add(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lines = append(b.lines, line)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.Join(b.lines, "\n")
}
