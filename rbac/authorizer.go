package rbac

import (
	"context"
	"errors"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// Authorizer decides requests by the RBAC policy in the store, as kube-apiserver's RBAC
// authorizer does, preceded by its privileged-group authorizer: a member of system:masters may
// do everything.
type Authorizer struct {
	src *source
}

// New returns an Authorizer reading the policy through r.
func New(r Reader) *Authorizer { return &Authorizer{src: newSource(r)} }

var _ authorizer.UnconditionalAuthorizer = (*Authorizer)(nil)

// Authorize allows a when a rule bound to its user allows it; otherwise it has no opinion (a
// denial, RBAC being the only authorizer), with no reason unless the policy could not be read,
// as kube-apiserver's.
func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	u := attrs.GetUser()
	if u == nil {
		return authorizer.DecisionNoOpinion, "no user on request.", nil
	}
	if slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return authorizer.DecisionAllow, "", nil
	}
	var reason string
	err := a.visitRules(ctx, u, attrs.GetNamespace(), func(source func() string, rule *rbacv1.PolicyRule) bool {
		if RuleAllows(attrs, rule) {
			reason = "RBAC: allowed by " + source()
			return false
		}
		return true
	})
	if reason != "" {
		return authorizer.DecisionAllow, reason, nil
	}
	if err != nil {
		return authorizer.DecisionNoOpinion, "RBAC: " + err.Error(), nil
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// Rules returns every rule bound to u in namespace (cluster-wide rules only when namespace is
// ""), as kube-apiserver's rule resolver: system:masters' through its ClusterRoleBinding to
// cluster-admin. A read error ends the walk: the rules found before it are returned with it.
func (a *Authorizer) Rules(ctx context.Context, u user.Info, namespace string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	err := a.visitRules(ctx, u, namespace, func(_ func() string, rule *rbacv1.PolicyRule) bool {
		rules = append(rules, *rule)
		return true
	})
	return rules, err
}

// visitRules calls visit with every rule bound to u: through ClusterRoleBindings, then through
// the RoleBindings of namespace, until visit returns false. source names the binding and role
// as kube-apiserver's reasons do (built only when asked).
func (a *Authorizer) visitRules(ctx context.Context, u user.Info, namespace string, visit func(source func() string, rule *rbacv1.PolicyRule) bool) error {
	crbs, err := a.src.clusterRoleBindings(ctx)
	if err != nil {
		return err
	}
	for _, b := range crbs {
		i, ok := appliesTo(u, b.Subjects, "")
		if !ok {
			continue
		}
		rules, err := a.roleRefRules(ctx, b.RoleRef, "")
		if errors.As(err, new(errRoleNotFound)) {
			continue // a binding to a missing role grants nothing
		}
		if err != nil {
			return err
		}
		src := func() string {
			return fmt.Sprintf("ClusterRoleBinding %q of %s %q to %s", b.Name, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(b.Subjects[i], ""))
		}
		for j := range rules {
			if !visit(src, &rules[j]) {
				return nil
			}
		}
	}
	if namespace == "" {
		return nil
	}
	rbs, err := a.src.roleBindings(ctx, namespace)
	if err != nil {
		return err
	}
	for _, b := range rbs {
		i, ok := appliesTo(u, b.Subjects, namespace)
		if !ok {
			continue
		}
		rules, err := a.roleRefRules(ctx, b.RoleRef, namespace)
		if errors.As(err, new(errRoleNotFound)) {
			continue
		}
		if err != nil {
			return err
		}
		src := func() string {
			return fmt.Sprintf("RoleBinding %q of %s %q to %s", b.Name+"/"+b.Namespace, b.RoleRef.Kind, b.RoleRef.Name, describeSubject(b.Subjects[i], namespace))
		}
		for j := range rules {
			if !visit(src, &rules[j]) {
				return nil
			}
		}
	}
	return nil
}

// errRoleNotFound says a roleRef names no role.
type errRoleNotFound struct{ kind, name string }

func (e errRoleNotFound) Error() string { return fmt.Sprintf("%s %q not found", e.kind, e.name) }

// roleRefRules returns the rules of the role ref names (a Role in namespace, or a ClusterRole).
func (a *Authorizer) roleRefRules(ctx context.Context, ref rbacv1.RoleRef, namespace string) ([]rbacv1.PolicyRule, error) {
	switch ref.Kind {
	case "Role":
		r, ok, err := a.src.role(ctx, namespace, ref.Name)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errRoleNotFound{"role", ref.Name}
		}
		return r.Rules, nil
	case "ClusterRole":
		r, ok, err := a.src.clusterRole(ctx, ref.Name)
		if err != nil {
			return nil, err
		}
		if !ok {
			return nil, errRoleNotFound{"clusterrole", ref.Name}
		}
		return a.clusterRoleRules(ctx, r, map[string]bool{})
	}
	return nil, fmt.Errorf("unsupported role reference kind: %q", ref.Kind)
}

// clusterRoleRules returns r's rules; for an aggregated ClusterRole, the rules of every
// ClusterRole its selectors match (their own aggregations resolved too), as kube's
// clusterrole-aggregation controller would have written them into r. seen stops cycles.
func (a *Authorizer) clusterRoleRules(ctx context.Context, r *rbacv1.ClusterRole, seen map[string]bool) ([]rbacv1.PolicyRule, error) {
	if r.AggregationRule == nil || seen[r.Name] {
		return r.Rules, nil
	}
	seen[r.Name] = true
	all, err := a.src.clusterRoles(ctx)
	if err != nil {
		return nil, err
	}
	var rules []rbacv1.PolicyRule
	for _, sel := range r.AggregationRule.ClusterRoleSelectors {
		s, err := metav1.LabelSelectorAsSelector(&sel)
		if err != nil {
			continue
		}
		for _, c := range all {
			if c.Name == r.Name || !s.Matches(labels.Set(c.Labels)) {
				continue
			}
			cr, err := a.clusterRoleRules(ctx, c, seen)
			if err != nil {
				return nil, err
			}
			for _, rule := range cr {
				if !slices.ContainsFunc(rules, func(x rbacv1.PolicyRule) bool { return equalRules(x, rule) }) {
					rules = append(rules, rule)
				}
			}
		}
	}
	return rules, nil
}

func equalRules(a, b rbacv1.PolicyRule) bool {
	return slices.Equal(a.Verbs, b.Verbs) && slices.Equal(a.APIGroups, b.APIGroups) && slices.Equal(a.Resources, b.Resources) &&
		slices.Equal(a.ResourceNames, b.ResourceNames) && slices.Equal(a.NonResourceURLs, b.NonResourceURLs)
}

// appliesTo returns the index of the first subject naming u (a ServiceAccount subject without
// a namespace is in namespace, the binding's).
func appliesTo(u user.Info, subjects []rbacv1.Subject, namespace string) (int, bool) {
	for i, s := range subjects {
		switch s.Kind {
		case rbacv1.UserKind:
			if u.GetName() == s.Name {
				return i, true
			}
		case rbacv1.GroupKind:
			if slices.Contains(u.GetGroups(), s.Name) {
				return i, true
			}
		case rbacv1.ServiceAccountKind:
			ns := namespace
			if s.Namespace != "" {
				ns = s.Namespace
			}
			if ns != "" && serviceaccount.MatchesUsername(ns, s.Name, u.GetName()) {
				return i, true
			}
		}
	}
	return 0, false
}

// describeSubject names a subject as kube-apiserver's reasons do (a ServiceAccount as
// name/namespace, as a RoleBinding).
func describeSubject(s rbacv1.Subject, namespace string) string {
	switch s.Kind {
	case rbacv1.ServiceAccountKind:
		if s.Namespace != "" {
			namespace = s.Namespace
		}
		return fmt.Sprintf("%s %q", s.Kind, s.Name+"/"+namespace)
	default:
		return fmt.Sprintf("%s %q", s.Kind, s.Name)
	}
}
