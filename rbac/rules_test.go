package rbac_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/opemu/opemu/rbac"
)

// TestRuleAllows: kube's rule semantics, case by case (verbs, groups, resources with
// subresources and "*/sub", resourceNames, non-resource URLs with a trailing "*").
func TestRuleAllows(t *testing.T) {
	t.Parallel()
	cm := rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list"}}
	named := rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{"a"}, Verbs: []string{"*"}}
	anyStatus := rbacv1.PolicyRule{APIGroups: []string{"*"}, Resources: []string{"*/status"}, Verbs: []string{"update"}}
	urls := rbacv1.PolicyRule{NonResourceURLs: []string{"/healthz", "/apis/*"}, Verbs: []string{"get"}}
	res := func(verb, group, resource, sub, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Name: name, ResourceRequest: true}
	}
	path := func(verb, p string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{Verb: verb, Path: p}
	}
	tests := []struct {
		name  string
		rule  rbacv1.PolicyRule
		attrs authorizer.AttributesRecord
		want  bool
	}{
		{"verb and resource", cm, res("get", "", "configmaps", "", "x"), true},
		{"other verb", cm, res("create", "", "configmaps", "", ""), false},
		{"other group", cm, res("get", "apps", "configmaps", "", "x"), false},
		{"a subresource is not the resource", cm, res("get", "", "configmaps", "status", "x"), false},
		{"named object", named, res("delete", "apps", "deployments", "", "a"), true},
		{"another name", named, res("delete", "apps", "deployments", "", "b"), false},
		{"a list names nothing", named, res("list", "apps", "deployments", "", ""), false},
		{"*/status", anyStatus, res("update", "apps", "deployments", "status", "a"), true},
		{"*/status is not the resource", anyStatus, res("update", "apps", "deployments", "", "a"), false},
		{"exact URL", urls, path("get", "/healthz"), true},
		{"URL prefix", urls, path("get", "/apis/apps/v1"), true},
		{"not a prefix", urls, path("get", "/api/v1"), false},
		{"a URL rule is no resource rule", urls, res("get", "", "healthz", "", ""), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, rbac.RuleAllows(tt.attrs, &tt.rule))
		})
	}
}

// TestCompactString: a rule as kube-apiserver's escalation errors print it.
func TestCompactString(t *testing.T) {
	t.Parallel()
	assert.Equal(t, `{APIGroups:["apps"], Resources:["deployments"], ResourceNames:["a"], Verbs:["list"]}`,
		rbac.CompactString(rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, ResourceNames: []string{"a"}, Verbs: []string{"list"}}))
	assert.Equal(t, `{NonResourceURLs:["/healthz"], Verbs:["get"]}`, rbac.CompactString(rbacv1.PolicyRule{NonResourceURLs: []string{"/healthz"}, Verbs: []string{"get"}}))
}

// TestBootstrap: the recorded policy decodes, and holds what the issue names.
func TestBootstrap(t *testing.T) {
	t.Parallel()
	names := map[string]bool{}
	for _, o := range rbac.Bootstrap() {
		m := o.(map[string]any)
		names[m["kind"].(string)+"/"+m["metadata"].(map[string]any)["name"].(string)] = true
	}
	for _, n := range []string{"ClusterRole/cluster-admin", "ClusterRole/admin", "ClusterRole/edit", "ClusterRole/view",
		"ClusterRole/system:discovery", "ClusterRole/system:basic-user", "ClusterRole/system:public-info-viewer",
		"ClusterRoleBinding/cluster-admin", "ClusterRoleBinding/system:discovery", "ClusterRoleBinding/system:basic-user",
		"ClusterRoleBinding/system:public-info-viewer"} {
		assert.True(t, names[n], n)
	}
	assert.Len(t, names, 127, "73 ClusterRoles and 54 ClusterRoleBindings, as kube-apiserver v1.37.2 starts with")
}
