package rbac

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Rule semantics as kube-apiserver's RBAC authorizer applies them (k8s.io/kubernetes
// pkg/apis/rbac/v1/evaluation_helpers.go, which lives in a module opemu does not import).

// RuleAllows reports whether rule allows the request a describes.
func RuleAllows(a authorizer.Attributes, rule *rbacv1.PolicyRule) bool {
	if a.IsResourceRequest() {
		combined := a.GetResource()
		if sub := a.GetSubresource(); sub != "" {
			combined += "/" + sub
		}
		return verbMatches(rule, a.GetVerb()) &&
			apiGroupMatches(rule, a.GetAPIGroup()) &&
			resourceMatches(rule, combined, a.GetSubresource()) &&
			resourceNameMatches(rule, a.GetName())
	}
	return verbMatches(rule, a.GetVerb()) && nonResourceURLMatches(rule, a.GetPath())
}

// RulesAllow reports whether any of rules allows a.
func RulesAllow(a authorizer.Attributes, rules ...rbacv1.PolicyRule) bool {
	for i := range rules {
		if RuleAllows(a, &rules[i]) {
			return true
		}
	}
	return false
}

func verbMatches(rule *rbacv1.PolicyRule, verb string) bool {
	return slices.Contains(rule.Verbs, rbacv1.VerbAll) || slices.Contains(rule.Verbs, verb)
}

func apiGroupMatches(rule *rbacv1.PolicyRule, group string) bool {
	return slices.Contains(rule.APIGroups, rbacv1.APIGroupAll) || slices.Contains(rule.APIGroups, group)
}

// resourceMatches matches "*", the resource (with "/subresource" when the request names one),
// and "*/subresource".
func resourceMatches(rule *rbacv1.PolicyRule, combined, sub string) bool {
	for _, r := range rule.Resources {
		switch {
		case r == rbacv1.ResourceAll, r == combined:
			return true
		case sub != "" && len(r) == len(sub)+2 && strings.HasPrefix(r, "*/") && strings.HasSuffix(r, sub):
			return true
		}
	}
	return false
}

// resourceNameMatches: a rule without resourceNames names every object; one with them only
// those (never a request without a name, as a list or a create).
func resourceNameMatches(rule *rbacv1.PolicyRule, name string) bool {
	return len(rule.ResourceNames) == 0 || slices.Contains(rule.ResourceNames, name)
}

// nonResourceURLMatches matches "*", the path, and a prefix ending in "*".
func nonResourceURLMatches(rule *rbacv1.PolicyRule, path string) bool {
	for _, u := range rule.NonResourceURLs {
		switch {
		case u == rbacv1.NonResourceAll, u == path:
			return true
		case strings.HasSuffix(u, "*") && strings.HasPrefix(path, strings.TrimRight(u, "*")):
			return true
		}
	}
	return false
}

// CompactString is a rule as kube-apiserver's escalation errors print it:
// {APIGroups:[""], Resources:["configmaps"], Verbs:["create"]}.
func CompactString(r rbacv1.PolicyRule) string {
	var parts []string
	add := func(name string, v []string) {
		if len(v) > 0 {
			parts = append(parts, fmt.Sprintf("%s:%q", name, v))
		}
	}
	add("APIGroups", r.APIGroups)
	add("Resources", r.Resources)
	add("NonResourceURLs", r.NonResourceURLs)
	add("ResourceNames", r.ResourceNames)
	add("Verbs", r.Verbs)
	return "{" + strings.Join(parts, ", ") + "}"
}

// compactRules merges the verbs of rules naming one group, one resource and at most one name,
// as kube-apiserver does before it lists the permissions an escalation lacks.
func compactRules(rules []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	type simple struct {
		group, resource string
		named           bool
		name            string
	}
	out := make([]rbacv1.PolicyRule, 0, len(rules))
	merged := map[simple]*rbacv1.PolicyRule{}
	var order []simple
	for _, r := range rules {
		if len(r.ResourceNames) > 1 || len(r.NonResourceURLs) > 0 || len(r.APIGroups) != 1 || len(r.Resources) != 1 {
			out = append(out, r)
			continue
		}
		k := simple{group: r.APIGroups[0], resource: r.Resources[0], named: len(r.ResourceNames) == 1}
		if k.named {
			k.name = r.ResourceNames[0]
		}
		if m, ok := merged[k]; ok {
			m.Verbs = append(m.Verbs, r.Verbs...)
			continue
		}
		merged[k] = r.DeepCopy()
		order = append(order, k)
	}
	for _, k := range order {
		out = append(out, *merged[k])
	}
	return out
}
