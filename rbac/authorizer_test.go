package rbac_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/rbac"
	"github.com/opemu/opemu/registry/registrytest"
)

// policyEnv is a store holding kube's bootstrap policy, namespace ns, and a Role allowing
// get, list and create on ConfigMaps bound to ServiceAccount ns/sa; and an authorizer over it.
func policyEnv(t testing.TB) (*rbac.Authorizer, *registrytest.Env) {
	t.Helper()
	env := registrytest.New(t, registrytest.Options{})
	ctx := context.Background()
	objs := append(rbac.Bootstrap(),
		map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "ns"}},
		map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": map[string]any{"name": "cm", "namespace": "ns"},
			"rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"get", "list", "create"}}}},
		map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": map[string]any{"name": "cm", "namespace": "ns"},
			"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "cm"},
			"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "sa", "namespace": "ns"}}})
	require.NoError(t, env.Registry.Bootstrap(ctx, objs...))
	return rbac.New(env.Registry.Client("test")), env
}

var sa = &user.DefaultInfo{Name: "system:serviceaccount:ns:sa", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:ns", "system:authenticated"}}

func TestAuthorize(t *testing.T) {
	t.Parallel()
	a, env := policyEnv(t)
	ctx := context.Background()
	cm := func(u user.Info, verb, ns string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, Namespace: ns, APIVersion: "v1", Resource: "configmaps", ResourceRequest: true}
	}
	tests := []struct {
		name   string
		attrs  authorizer.Attributes
		want   authorizer.Decision
		reason string
	}{
		{"bound by a RoleBinding", cm(sa, "create", "ns"), authorizer.DecisionAllow, `RBAC: allowed by RoleBinding "cm/ns" of Role "cm" to ServiceAccount "sa/ns"`},
		{"a verb the Role lacks", cm(sa, "delete", "ns"), authorizer.DecisionNoOpinion, ""},
		{"another namespace", cm(sa, "list", "other"), authorizer.DecisionNoOpinion, ""},
		{"discovery for authenticated users", authorizer.AttributesRecord{User: sa, Verb: "get", Path: "/apis"}, authorizer.DecisionAllow,
			`RBAC: allowed by ClusterRoleBinding "system:discovery" of ClusterRole "system:discovery" to Group "system:authenticated"`},
		{"public info for anonymous", authorizer.AttributesRecord{User: &user.DefaultInfo{Name: "system:anonymous", Groups: []string{"system:unauthenticated"}}, Verb: "get", Path: "/version"},
			authorizer.DecisionAllow, `RBAC: allowed by ClusterRoleBinding "system:public-info-viewer" of ClusterRole "system:public-info-viewer" to Group "system:unauthenticated"`},
		{"system:masters", cm(&user.DefaultInfo{Name: "admin", Groups: []string{"system:masters"}}, "delete", "other"), authorizer.DecisionAllow, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, reason, err := a.Authorize(ctx, tt.attrs)
			require.NoError(t, err)
			assert.Equal(t, tt.want, d)
			assert.Equal(t, tt.reason, reason)
		})
	}

	// A RoleBinding deleted is out of force for the next decision.
	_, _, err := env.Registry.Client("test").Delete(ctx, cache.Key{Group: "rbac.authorization.k8s.io", Resource: "rolebindings", Namespace: "ns", Name: "cm"}, cache.Preconditions{})
	require.NoError(t, err)
	d, _, err := a.Authorize(ctx, cm(sa, "create", "ns"))
	require.NoError(t, err)
	assert.Equal(t, authorizer.DecisionNoOpinion, d)
}

// BenchmarkAuthorize is one decision for a ServiceAccount a RoleBinding allows, over kube's
// bootstrap policy (54 ClusterRoleBindings read and matched first): what RBAC adds to a request.
func BenchmarkAuthorize(b *testing.B) {
	a, _ := policyEnv(b)
	ctx := context.Background()
	attrs := authorizer.AttributesRecord{User: sa, Verb: "create", Namespace: "ns", APIVersion: "v1", Resource: "configmaps", ResourceRequest: true}
	b.ReportAllocs()
	for b.Loop() {
		if d, _, _ := a.Authorize(ctx, attrs); d != authorizer.DecisionAllow {
			b.Fatal("denied")
		}
	}
}
