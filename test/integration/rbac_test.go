package integration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/opemu/opemu/app"
	"github.com/opemu/opemu/test/internal/kubectl"
	"github.com/opemu/opemu/testenv"
)

// Issue 27's acceptance, as a new user meets it: with RBAC on, a ServiceAccount bound to a Role
// that allows get, list and watch on ConfigMaps in one namespace gets kube-apiserver's 403 for
// create and for another namespace; `kubectl auth can-i --as` says no, then yes once the Role
// allows the verb. The messages are the ones kube-apiserver v1.37.2 gives (recorded from the
// oracle with --authorization-mode=RBAC).

// rbacEnv starts a testenv with RBAC and makes namespaces ns and other, ServiceAccount ns/sa,
// Role ns/cm-read (get, list, watch ConfigMaps) bound to it. It returns the admin's clientset.
func rbacEnv(t *testing.T) (*testenv.Environment, kubernetes.Interface) {
	t.Helper()
	env := testenv.New(t, testenv.Options{RBAC: true})
	admin := kubernetes.NewForConfigOrDie(env.Config)
	ctx := t.Context()
	for _, ns := range []string{"ns", "other"} {
		_, err := admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}
	_, err := admin.CoreV1().ServiceAccounts("ns").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().Roles("ns").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm-read"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings("ns").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cm-read"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm-read"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa", Namespace: "ns"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	return env, admin
}

// saClient is a clientset authenticated by a token of ns/sa from the TokenRequest subresource.
func saClient(t *testing.T, env *testenv.Environment, admin kubernetes.Interface) (kubernetes.Interface, string) {
	t.Helper()
	tr, err := admin.CoreV1().ServiceAccounts("ns").CreateToken(t.Context(), "sa", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	require.NoError(t, err)
	require.NotEmpty(t, tr.Status.Token)
	assert.Equal(t, []string{"https://kubernetes.default.svc.cluster.local"}, tr.Spec.Audiences)
	assert.EqualValues(t, 3600, *tr.Spec.ExpirationSeconds)
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = tr.Status.Token
	return kubernetes.NewForConfigOrDie(cfg), tr.Status.Token
}

func TestRBACServiceAccountForbidden(t *testing.T) {
	t.Parallel()
	env, admin := rbacEnv(t)
	sa, token := saClient(t, env, admin)
	ctx := t.Context()
	review := func() *authenticationv1.TokenReview {
		tr, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		require.NoError(t, err)
		return tr
	}
	tr := review()
	assert.True(t, tr.Status.Authenticated)
	assert.Equal(t, "system:serviceaccount:ns:sa", tr.Status.User.Username)
	assert.Equal(t, []string{"https://kubernetes.default.svc.cluster.local"}, tr.Status.Audiences)

	_, err := sa.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{})
	require.NoError(t, err, "the Role allows list in ns")

	_, err = sa.CoreV1().ConfigMaps("ns").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "create: %v", err)
	assert.Equal(t, `configmaps is forbidden: User "system:serviceaccount:ns:sa" cannot create resource "configmaps" in API group "" in the namespace "ns"`, err.Error())
	assert.Equal(t, &metav1.StatusDetails{Kind: "configmaps"}, err.(apierrors.APIStatus).Status().Details)

	_, err = sa.CoreV1().ConfigMaps("other").List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "list in another namespace: %v", err)
	assert.Equal(t, `configmaps is forbidden: User "system:serviceaccount:ns:sa" cannot list resource "configmaps" in API group "" in the namespace "other"`, err.Error())

	_, err = sa.CoreV1().ConfigMaps("ns").Get(ctx, "missing", metav1.GetOptions{})
	assert.True(t, apierrors.IsNotFound(err), "get is allowed, so the answer is the 404: %v", err)

	// Who the token names, as kube-apiserver: the ServiceAccount's user and groups.
	who, err := sa.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "system:serviceaccount:ns:sa", who.Status.UserInfo.Username)
	assert.Equal(t, []string{"system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"}, who.Status.UserInfo.Groups)

	// The token stops working with its ServiceAccount.
	require.NoError(t, admin.CoreV1().ServiceAccounts("ns").Delete(ctx, "sa", metav1.DeleteOptions{}))
	_, err = sa.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{})
	assert.True(t, apierrors.IsUnauthorized(err), "a deleted ServiceAccount's token: %v", err)
	tr = review()
	assert.False(t, tr.Status.Authenticated)
	assert.Equal(t, "invalid bearer token", tr.Status.Error)
}

func TestRBACKubectlAuthCanI(t *testing.T) {
	t.Parallel()
	env, admin := rbacEnv(t)
	k := kubectl.New(t, env.KubeConfig)
	canI := func(args ...string) (string, int) {
		out, err := k.Cmd(t.Context(), append([]string{"auth", "can-i"}, args...)...).CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else {
			require.NoError(t, err)
		}
		return strings.TrimSpace(string(out)), code
	}
	as := "--as=system:serviceaccount:ns:sa"
	out, code := canI(as, "create", "configmaps", "-n", "ns")
	assert.Equal(t, "no", out)
	assert.Equal(t, 1, code)
	out, code = canI(as, "list", "configmaps", "-n", "ns")
	assert.Equal(t, "yes", out)
	assert.Equal(t, 0, code)

	k.Run("-n", "ns", "patch", "role", "cm-read", "--type=json", `-p=[{"op":"add","path":"/rules/0/verbs/-","value":"create"}]`)
	out, code = canI(as, "create", "configmaps", "-n", "ns")
	assert.Equal(t, "yes", out)
	assert.Equal(t, 0, code)
	out, _ = canI(as, "create", "configmaps", "-n", "other")
	assert.Equal(t, "no", out)

	list := k.Run("auth", "can-i", "--list", "-n", "ns", as)
	assert.Regexp(t, `(?m)^configmaps\s+\[\]\s+\[\]\s+\[get list watch create\]$`, list)
	assert.Regexp(t, `(?m)^selfsubjectaccessreviews\.authorization\.k8s\.io\s+\[\]\s+\[\]\s+\[create\]$`, list, "system:basic-user, for every authenticated user")

	// Impersonating needs the impersonate verbs: a user without them gets kube-apiserver
	// v1.37's 403 (its constrained impersonation names the first verb it checked, as the
	// oracle words it).
	alice, err := env.AddUser(testenv.User{Name: "alice", Groups: []string{"devs"}}, nil)
	require.NoError(t, err)
	ak := kubernetes.NewForConfigOrDie(withImpersonation(alice.Config(), "system:serviceaccount:ns:sa"))
	_, err = ak.CoreV1().ConfigMaps("ns").List(t.Context(), metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Equal(t, `configmaps is forbidden: User "alice" cannot impersonate-on:serviceaccount:list resource "configmaps" in API group "" in the namespace "ns"`, err.Error())
	_ = admin
}

func withImpersonation(cfg *rest.Config, user string) *rest.Config {
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	return cfg
}

// TestRBACUsersAndEscalation: AddUser's users get what bindings grant (an aggregated
// ClusterRole through a RoleBinding to their group), the access reviews answer truthfully, and
// a user cannot grant what it does not hold.
func TestRBACUsersAndEscalation(t *testing.T) {
	t.Parallel()
	env, admin := rbacEnv(t)
	ctx := t.Context()
	alice, err := env.AddUser(testenv.User{Name: "alice", Groups: []string{"devs"}}, nil)
	require.NoError(t, err)
	ac := kubernetes.NewForConfigOrDie(alice.Config())

	_, err = ac.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "%v", err)

	// Escalation: alice may write Roles in ns, not grant what she lacks (the message as the oracle words it).
	_, err = admin.RbacV1().Roles("ns").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "rbac-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{rbacv1.GroupName}, Resources: []string{"roles", "rolebindings"}, Verbs: []string{"create", "get", "update", "list"}}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = admin.RbacV1().RoleBindings("ns").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "rbac-writer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "rbac-writer"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "alice", APIGroup: rbacv1.GroupName}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = ac.RbacV1().Roles("ns").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "esc"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list"}, ResourceNames: []string{"a"}}}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Equal(t, "roles.rbac.authorization.k8s.io \"esc\" is forbidden: user \"alice\" (groups=[\"devs\" \"system:authenticated\"]) is attempting to grant RBAC permissions not currently held:\n"+
		"{APIGroups:[\"\"], Resources:[\"configmaps\"], Verbs:[\"create\" \"get\"]}\n"+
		"{APIGroups:[\"apps\"], Resources:[\"deployments\"], ResourceNames:[\"a\"], Verbs:[\"list\"]}", err.Error())
	// view is aggregated from system:aggregate-to-view, as a cluster's controller-manager does.
	_, err = admin.RbacV1().RoleBindings("ns").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "devs-view"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "view"},
		Subjects: []rbacv1.Subject{{Kind: "Group", Name: "devs", APIGroup: rbacv1.GroupName}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	_, err = ac.CoreV1().ConfigMaps("ns").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)

	sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: "alice", Groups: []string{"devs"}, ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "ns", Verb: "list", Resource: "configmaps"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.True(t, sar.Status.Allowed)
	assert.Equal(t, `RBAC: allowed by RoleBinding "devs-view/ns" of ClusterRole "view" to Group "devs"`, sar.Status.Reason)
	lsar, err := admin.AuthorizationV1().LocalSubjectAccessReviews("other").Create(ctx, &authorizationv1.LocalSubjectAccessReview{ObjectMeta: metav1.ObjectMeta{Namespace: "other"},
		Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", Groups: []string{"devs"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: "other", Verb: "list", Resource: "configmaps"}}}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.False(t, lsar.Status.Allowed)

	_, err = ac.RbacV1().Roles("ns").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "held"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{})
	require.NoError(t, err, "granting what she holds (through view)")
	_, err = ac.RbacV1().RoleBindings("ns").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "esc"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob", APIGroup: rbacv1.GroupName}}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsForbidden(err), "binding edit, which alice does not hold: %v", err)
	_, err = ac.RbacV1().RoleBindings("ns").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "esc2"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "nope"},
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "bob", APIGroup: rbacv1.GroupName}}}, metav1.CreateOptions{})
	require.True(t, apierrors.IsNotFound(err), "%v", err)
	assert.Equal(t, `rolebindings.rbac.authorization.k8s.io "nope" not found`, err.Error())
}

// TestRBACAnonymous: a request without credentials is system:anonymous, which may read only
// what system:public-info-viewer allows.
func TestRBACAnonymous(t *testing.T) {
	t.Parallel()
	env := testenv.New(t, testenv.Options{RBAC: true})
	anon := kubernetes.NewForConfigOrDie(rest.AnonymousClientConfig(env.Config))
	_, err := anon.Discovery().ServerVersion()
	require.NoError(t, err)
	_, err = anon.CoreV1().ConfigMaps("default").List(context.Background(), metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Equal(t, `configmaps is forbidden: User "system:anonymous" cannot list resource "configmaps" in API group "" in the namespace "default"`, err.Error())
}

// TestRBACClientCertificate: a client certificate signed by the server's client CA
// authenticates its CommonName, with its Organizations as groups, as kube-apiserver reads it.
func TestRBACClientCertificate(t *testing.T) {
	t.Parallel()
	ca := newTestCA(t)
	servingPEM, servingKey := ca.issue(t, x509.Certificate{Subject: pkix.Name{CommonName: "127.0.0.1"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	serving, err := tls.X509KeyPair(servingPEM, servingKey)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	pool.AddCert(ca.cert)
	env := testenv.New(t, testenv.Options{RBAC: true, Server: app.Config{
		TLS: &tls.Config{Certificates: []tls.Certificate{serving}, MinVersion: tls.VersionTLS12}, ClientCA: pool}})

	clientPEM, clientKey := ca.issue(t, x509.Certificate{Subject: pkix.Name{CommonName: "carol", Organization: []string{"devs", "ops"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.CAData, cfg.CertData, cfg.KeyData = ca.pem, clientPEM, clientKey
	carol := kubernetes.NewForConfigOrDie(cfg)
	who, err := carol.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, "carol", who.Status.UserInfo.Username)
	assert.ElementsMatch(t, []string{"devs", "ops", "system:authenticated"}, who.Status.UserInfo.Groups)
	_, err = carol.CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
	require.True(t, apierrors.IsForbidden(err), "%v", err)
	assert.Contains(t, err.Error(), `User "carol" cannot list resource "configmaps"`)

	// A certificate from another CA is refused (401), not taken as anonymous.
	other := newTestCA(t)
	otherPEM, otherKey := other.issue(t, x509.Certificate{Subject: pkix.Name{CommonName: "mallory", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
	cfg.CertData, cfg.KeyData = otherPEM, otherKey
	_, err = kubernetes.NewForConfigOrDie(cfg).CoreV1().ConfigMaps("default").List(t.Context(), metav1.ListOptions{})
	require.Error(t, err)
	assert.False(t, err == nil || apierrors.IsForbidden(err), "%v", err)
}

// testCA is a CA made for one test.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t *testing.T) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(t, err)
	cert, err := x509.ParseCertificate(der)
	require.NoError(t, err)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue signs tmpl (valid for an hour) and returns the certificate and its key in PEM.
func (ca *testCA) issue(t *testing.T, tmpl x509.Certificate) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl.SerialNumber = big.NewInt(time.Now().UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().Add(time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, ca.cert, &key.PublicKey, ca.key)
	require.NoError(t, err)
	kder, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}
