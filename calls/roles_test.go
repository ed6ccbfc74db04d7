package calls_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/opemu/opemu/calls"
)

// TestGenerate: the rules per namespace (cluster-wide calls in the ClusterRole), verbs gathered
// per resource and merged per verb set, names only when asked, other users' calls and
// non-resource paths left out, refusals listed with their rule.
func TestGenerate(t *testing.T) {
	const sa = "system:serviceaccount:ops:op"
	c := func(verb, group, res, sub, ns, name string, code int32) calls.Call {
		return calls.Call{User: sa, Verb: verb, APIGroup: group, Resource: res, Subresource: sub, Namespace: ns, Name: name, Code: code,
			RequestURI: "/x", Forbidden: code == 403}
	}
	cs := []calls.Call{
		c("watch", "apps", "deployments", "", "", "", 200),
		c("get", "apps", "deployments", "", "web", "a", 200),
		c("update", "apps", "deployments", "", "web", "a", 200),
		c("get", "", "configmaps", "", "web", "b", 200),
		c("update", "apps", "deployments", "status", "web", "a", 403),
		c("create", "", "configmaps", "", "web", "new", 201),
		{User: "someone-else", Verb: "delete", Resource: "secrets", Namespace: "web", Name: "s"},
		{User: sa, Verb: "get", RequestURI: "/version"},
	}
	roles := calls.Generate(sa, cs, calls.RoleOptions{})
	assert.Equal(t, map[string][]rbacv1.PolicyRule{
		"": {{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"watch"}}},
		"web": {
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "update"}},
			{APIGroups: []string{"apps"}, Resources: []string{"deployments/status"}, Verbs: []string{"update"}},
		},
	}, roles.Namespace)
	require.Len(t, roles.Forbidden, 1)
	assert.Equal(t, "web", roles.Forbidden[0].Namespace)
	assert.Equal(t, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments/status"}, Verbs: []string{"update"}}, roles.Forbidden[0].Rule)
	assert.Equal(t, []string{"/version"}, roles.NonResource)

	named := calls.Generate(sa, cs, calls.RoleOptions{Names: true, Name: "op"})
	assert.Contains(t, named.Namespace["web"], rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}},
		"a create is never restricted by name")
	assert.Contains(t, named.Namespace["web"], rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}, ResourceNames: []string{"b"}})

	y, err := named.YAML()
	require.NoError(t, err)
	assert.Contains(t, string(y), "# Refused by the authorizer (1)")
	assert.Contains(t, string(y), "#   UPDATE /x -> Role in web:")
	docs := splitDocs(string(y))
	require.Len(t, docs, 4, "ClusterRole, its binding, Role, its binding")
	var binding rbacv1.RoleBinding
	require.NoError(t, yaml.Unmarshal([]byte(docs[3]), &binding))
	assert.Equal(t, "RoleBinding", binding.Kind)
	assert.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "ops", Name: "op"}}, binding.Subjects)
	assert.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "op"}, binding.RoleRef)
	assert.NotContains(t, string(y), "creationTimestamp")
}

func splitDocs(y string) []string { return strings.Split(y, "---\n") }
