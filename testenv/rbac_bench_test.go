package testenv_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/opemu/opemu/app"
	"github.com/opemu/opemu/certs"
	"github.com/opemu/opemu/testenv"
)

// BenchmarkRBACWritePath is the write path's cost with RBAC on, A/B: ConfigMap creates through
// client-go over HTTPS (both arms serve the same kind of certificate), with
// AUTHORIZATION_MODE=AlwaysAllow (no credentials), and with RBAC as the admin (system:masters:
// allowed before any binding is read), as a user a RoleBinding allows (static token: the
// authorizer's cost), and as a ServiceAccount a RoleBinding allows (its token: the JWT's
// verification too). The store holds kube's bootstrap policy (54 ClusterRoleBindings) and the
// binding. The policy arms are AlwaysAllow with one ValidatingAdmissionPolicy bound: matching
// the ConfigMaps (its CEL runs on every create), or Deployments only (the cost of a policy
// being there at all).
func BenchmarkRBACWritePath(b *testing.B) {
	for _, bc := range []struct {
		name   string
		rbac   bool
		as     string // "", "admin", "user", "serviceaccount"
		policy string // "", "configmaps", "deployments": the resource a bound policy matches
	}{
		{"always-allow", false, "", ""},
		{"always-allow-vap-matching", false, "", "configmaps"},
		{"always-allow-vap-elsewhere", false, "", "deployments"},
		{"rbac-admin", true, "admin", ""},
		{"rbac-user", true, "user", ""},
		{"rbac-serviceaccount", true, "serviceaccount", ""},
	} {
		b.Run(bc.name, func(b *testing.B) {
			caPEM, certPEM, keyPEM, err := certs.Generate([]string{"127.0.0.1"}, time.Now())
			if err != nil {
				b.Fatal(err)
			}
			cert, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				b.Fatal(err)
			}
			env := testenv.New(b, testenv.Options{RBAC: bc.rbac, Server: app.Config{
				TLS: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}}})
			cfg := rest.CopyConfig(env.Config) // https: Server.TLS is set
			cfg.CAData = caPEM
			admin := kubernetes.NewForConfigOrDie(cfg)
			ctx := context.Background()
			must := func(_ any, err error) {
				if err != nil {
					b.Fatal(err)
				}
			}
			must(admin.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}, metav1.CreateOptions{}))
			client := admin
			if bc.as == "user" || bc.as == "serviceaccount" {
				must(admin.CoreV1().ServiceAccounts("bench").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "sa"}}, metav1.CreateOptions{}))
				must(admin.RbacV1().Roles("bench").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm"},
					Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get", "list"}}}}, metav1.CreateOptions{}))
				must(admin.RbacV1().RoleBindings("bench").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "cm"},
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm"},
					Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "sa", Namespace: "bench"},
						{Kind: "User", Name: "bench-user", APIGroup: rbacv1.GroupName}}}, metav1.CreateOptions{}))
				ucfg := rest.AnonymousClientConfig(cfg)
				if bc.as == "user" {
					u, err := env.AddUser(testenv.User{Name: "bench-user"}, cfg)
					if err != nil {
						b.Fatal(err)
					}
					ucfg = u.Config()
				} else {
					tr, err := admin.CoreV1().ServiceAccounts("bench").CreateToken(ctx, "sa", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
					if err != nil {
						b.Fatal(err)
					}
					ucfg.BearerToken = tr.Status.Token
				}
				client = kubernetes.NewForConfigOrDie(ucfg)
			}
			cms := client.CoreV1().ConfigMaps("bench")
			if bc.policy != "" {
				bindPolicy(b, admin, bc.policy)
			}
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				i++
				if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)},
					Data: map[string]string{"key": "value"}}, metav1.CreateOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// bindPolicy stores a ValidatingAdmissionPolicy allowing at most 3 keys in a ConfigMap's data
// (an object selector on the matched resource) and its Deny binding, and waits until it is in
// force: for configmaps, until a dry-run create of 4 keys is refused.
func bindPolicy(b *testing.B, admin kubernetes.Interface, resource string) {
	ctx := context.Background()
	group := ""
	if resource == "deployments" {
		group = "apps"
	}
	_, err := admin.AdmissionregistrationV1().ValidatingAdmissionPolicies().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "few-keys"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			MatchConstraints: &admissionregistrationv1.MatchResources{ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionregistrationv1.RuleWithOperations{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}}}}}},
			Validations: []admissionregistrationv1.Validation{{Expression: "!has(object.data) || object.data.size() <= 3"}},
		}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	_, err = admin.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Create(ctx, &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "few-keys"},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: "few-keys",
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	if resource != "configmaps" {
		return
	}
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(time.Millisecond) {
		_, err := admin.CoreV1().ConfigMaps("bench").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
			Data: map[string]string{"a": "", "b": "", "c": "", "d": ""}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			return
		}
	}
	b.Fatal("the policy is not in force after 10s")
}
