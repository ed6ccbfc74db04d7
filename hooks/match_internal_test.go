package hooks

import (
	"testing"

	"github.com/opemu/opemu/webhooks"
	"github.com/stretchr/testify/assert"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestRuleMatches: the rules of a webhook, as kube-apiserver reads them.
func TestRuleMatches(t *testing.T) {
	t.Parallel()
	rule := func(ops []admissionregistrationv1.OperationType, groups, versions, resources []string, scope admissionregistrationv1.ScopeType) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{
			APIGroups: groups, APIVersions: versions, Resources: resources, Scope: ptr.To(scope)}}
	}
	create := []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	all := []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
	req := func(op webhooks.Operation, group, resource, sub, ns string) *webhooks.Request {
		return &webhooks.Request{Operation: op, Resource: metav1.GroupVersionResource{Group: group, Version: "v1", Resource: resource}, SubResource: sub, Namespace: ns}
	}
	tests := []struct {
		name string
		rule admissionregistrationv1.RuleWithOperations
		req  *webhooks.Request
		want bool
	}{
		{"exact", rule(create, []string{""}, []string{"v1"}, []string{"configmaps"}, "*"), req(webhooks.Create, "", "configmaps", "", "default"), true},
		{"other operation", rule(create, []string{""}, []string{"v1"}, []string{"configmaps"}, "*"), req(webhooks.Update, "", "configmaps", "", "default"), false},
		{"every operation", rule(all, []string{""}, []string{"v1"}, []string{"configmaps"}, "*"), req(webhooks.Delete, "", "configmaps", "", "default"), true},
		{"other group", rule(create, []string{"apps"}, []string{"v1"}, []string{"configmaps"}, "*"), req(webhooks.Create, "", "configmaps", "", "default"), false},
		{"any group", rule(create, []string{"*"}, []string{"*"}, []string{"configmaps"}, "*"), req(webhooks.Create, "", "configmaps", "", "default"), true},
		{"other version", rule(create, []string{""}, []string{"v2"}, []string{"configmaps"}, "*"), req(webhooks.Create, "", "configmaps", "", "default"), false},
		{"main resource only", rule(create, []string{"*"}, []string{"*"}, []string{"deployments"}, "*"), req(webhooks.Update, "apps", "deployments", "scale", "default"), false},
		{"a subresource", rule(all, []string{"*"}, []string{"*"}, []string{"deployments/scale"}, "*"), req(webhooks.Update, "apps", "deployments", "scale", "default"), true},
		{"every subresource of one", rule(all, []string{"*"}, []string{"*"}, []string{"deployments/*"}, "*"), req(webhooks.Update, "apps", "deployments", "status", "default"), true},
		{"every subresource of one, main too", rule(all, []string{"*"}, []string{"*"}, []string{"deployments/*"}, "*"), req(webhooks.Update, "apps", "deployments", "", "default"), true},
		{"star is main resources", rule(all, []string{"*"}, []string{"*"}, []string{"*"}, "*"), req(webhooks.Update, "apps", "deployments", "status", "default"), false},
		{"star slash status", rule(all, []string{"*"}, []string{"*"}, []string{"*/status"}, "*"), req(webhooks.Update, "apps", "deployments", "status", "default"), true},
		{"star slash star", rule(all, []string{"*"}, []string{"*"}, []string{"*/*"}, "*"), req(webhooks.Update, "apps", "deployments", "scale", "default"), true},
		{"cluster scope, namespaced", rule(all, []string{"*"}, []string{"*"}, []string{"*"}, admissionregistrationv1.ClusterScope), req(webhooks.Create, "", "configmaps", "", "default"), false},
		{"cluster scope, namespaces", rule(all, []string{"*"}, []string{"*"}, []string{"*"}, admissionregistrationv1.ClusterScope), req(webhooks.Create, "", "namespaces", "", ""), true},
		{"namespaced scope, namespaces", rule(all, []string{"*"}, []string{"*"}, []string{"*"}, admissionregistrationv1.NamespacedScope), req(webhooks.Create, "", "namespaces", "", ""), false},
		{"namespaced scope", rule(all, []string{"*"}, []string{"*"}, []string{"*"}, admissionregistrationv1.NamespacedScope), req(webhooks.Create, "", "configmaps", "", "default"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			assert.Equal(t, tt.want, ruleMatches(tt.rule, tt.req, tt.req.Resource.Version))
		})
	}
}
