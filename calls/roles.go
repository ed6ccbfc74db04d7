package calls

import (
	"bytes"
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// Least privilege, generated: the RBAC rules that allow exactly the resource calls one user
// was seen making, as audit2rbac derives them from kube-apiserver's audit log.

// RoleOptions says how Roles are generated.
type RoleOptions struct {
	// Names restricts rules about named objects to those names (resourceNames). Calls without
	// a name (list, watch, create, deletecollection) are never restricted.
	Names bool
	// Name names the generated roles and bindings. Empty means "observed:<user>".
	Name string
}

// Roles is what Generate found: the rules per namespace ("" for cluster-wide ones, which a
// ClusterRole holds) and the calls the authorizer refused.
type Roles struct {
	User      string
	Name      string
	Namespace map[string][]rbacv1.PolicyRule
	Forbidden []Forbidden
	// NonResource are the non-resource paths the user called (discovery and the like, which
	// kube-apiserver's system:discovery ClusterRole allows every authenticated user).
	NonResource []string
}

// Forbidden is a refused call and the rule, in the namespace's Role ("" for a ClusterRole),
// that would have allowed it.
type Forbidden struct {
	Call      Call
	Namespace string
	Rule      rbacv1.PolicyRule
}

// ruleKey is one rule's grouping: verbs are gathered per group, resource and name.
type ruleKey struct{ group, resource, name string }

// Generate derives user's roles from cs (its calls, or any calls: others are ignored).
func Generate(user string, cs []Call, o RoleOptions) Roles {
	roles := Roles{User: user, Name: o.Name, Namespace: map[string][]rbacv1.PolicyRule{}}
	if roles.Name == "" {
		roles.Name = "observed:" + user
	}
	verbs := map[string]map[ruleKey]map[string]bool{} // namespace → rule → verbs
	nonResource := map[string]bool{}
	for i := range cs {
		c := &cs[i]
		if c.User != user {
			continue
		}
		if !c.IsResource() {
			if p := c.Path(); p != "" {
				nonResource[p] = true
			}
			continue
		}
		k := ruleKey{group: c.APIGroup, resource: resourceOf(c)}
		if o.Names && c.Name != "" && c.Verb != "create" {
			k.name = c.Name
		}
		byRule := verbs[c.Namespace]
		if byRule == nil {
			byRule = map[ruleKey]map[string]bool{}
			verbs[c.Namespace] = byRule
		}
		if byRule[k] == nil {
			byRule[k] = map[string]bool{}
		}
		byRule[k][c.Verb] = true
		if c.Forbidden {
			roles.Forbidden = append(roles.Forbidden, Forbidden{Call: *c, Namespace: c.Namespace, Rule: ruleFor(k, []string{c.Verb})})
		}
	}
	for ns, byRule := range verbs {
		roles.Namespace[ns] = merge(byRule)
	}
	for p := range nonResource {
		roles.NonResource = append(roles.NonResource, p)
	}
	slices.Sort(roles.NonResource)
	return roles
}

func resourceOf(c *Call) string {
	if c.Subresource != "" {
		return c.Resource + "/" + c.Subresource
	}
	return c.Resource
}

func ruleFor(k ruleKey, verbs []string) rbacv1.PolicyRule {
	r := rbacv1.PolicyRule{APIGroups: []string{k.group}, Resources: []string{k.resource}, Verbs: verbs}
	if k.name != "" {
		r.ResourceNames = []string{k.name}
	}
	return r
}

// merge turns the verbs per rule key into rules: one per API group and verb set (and name),
// listing its resources, in a stable order.
func merge(byRule map[ruleKey]map[string]bool) []rbacv1.PolicyRule {
	type groupKey struct{ group, verbs, name string }
	resources := map[groupKey][]string{}
	for k, vs := range byRule {
		verbs := make([]string, 0, len(vs))
		for v := range vs {
			verbs = append(verbs, v)
		}
		slices.Sort(verbs)
		gk := groupKey{k.group, strings.Join(verbs, ","), k.name}
		resources[gk] = append(resources[gk], k.resource)
	}
	keys := make([]groupKey, 0, len(resources))
	for gk := range resources {
		keys = append(keys, gk)
	}
	slices.SortFunc(keys, func(a, b groupKey) int {
		return strings.Compare(a.group+"\x00"+a.name+"\x00"+a.verbs, b.group+"\x00"+b.name+"\x00"+b.verbs)
	})
	rules := make([]rbacv1.PolicyRule, 0, len(keys))
	for _, gk := range keys {
		res := resources[gk]
		slices.Sort(res)
		r := rbacv1.PolicyRule{APIGroups: []string{gk.group}, Resources: res, Verbs: strings.Split(gk.verbs, ",")}
		if gk.name != "" {
			r.ResourceNames = []string{gk.name}
		}
		rules = append(rules, r)
	}
	return rules
}

// subject is the binding's subject for the user: its ServiceAccount, or the User.
func (r Roles) subject() rbacv1.Subject {
	c := Call{User: r.User}
	if ns, name, ok := c.ServiceAccount(); ok {
		return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
	}
	return rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: r.User}
}

// Objects returns the ClusterRole and Roles, each with its binding to the user: the
// ClusterRole first, then the Roles by namespace.
func (r Roles) Objects() []any {
	namespaces := make([]string, 0, len(r.Namespace))
	for ns := range r.Namespace {
		namespaces = append(namespaces, ns)
	}
	slices.Sort(namespaces)
	typeMeta := func(kind string) metav1.TypeMeta {
		return metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: kind}
	}
	var objs []any
	for _, ns := range namespaces {
		if ns == "" {
			objs = append(objs,
				&rbacv1.ClusterRole{TypeMeta: typeMeta("ClusterRole"), ObjectMeta: metav1.ObjectMeta{Name: r.Name}, Rules: r.Namespace[ns]},
				&rbacv1.ClusterRoleBinding{TypeMeta: typeMeta("ClusterRoleBinding"), ObjectMeta: metav1.ObjectMeta{Name: r.Name},
					RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: r.Name}, Subjects: []rbacv1.Subject{r.subject()}})
			continue
		}
		meta := metav1.ObjectMeta{Name: r.Name, Namespace: ns}
		objs = append(objs,
			&rbacv1.Role{TypeMeta: typeMeta("Role"), ObjectMeta: meta, Rules: r.Namespace[ns]},
			&rbacv1.RoleBinding{TypeMeta: typeMeta("RoleBinding"), ObjectMeta: meta,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name}, Subjects: []rbacv1.Subject{r.subject()}})
	}
	return objs
}

// YAML writes the roles as a YAML stream kubectl apply takes, the forbidden calls and the rule
// that would allow each as comments first.
func (r Roles) YAML() ([]byte, error) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# The least privilege of %s: what it was seen doing (opemu's record of calls).\n", r.User)
	if len(r.Forbidden) > 0 {
		fmt.Fprintf(&b, "# Refused by the authorizer (%d), and the rule that allows each (included below):\n", len(r.Forbidden))
		for _, f := range r.Forbidden {
			where := "ClusterRole"
			if f.Namespace != "" {
				where = "Role in " + f.Namespace
			}
			rule, err := yaml.Marshal(f.Rule)
			if err != nil {
				return nil, err
			}
			fmt.Fprintf(&b, "#   %s %s -> %s: %s\n", strings.ToUpper(f.Call.Verb), f.Call.Path(), where,
				strings.ReplaceAll(strings.TrimSpace(string(flow(rule))), "\n", "; "))
		}
	}
	if len(r.NonResource) > 0 {
		fmt.Fprintf(&b, "# Non-resource paths called (allowed to authenticated users by system:discovery): %s\n", strings.Join(r.NonResource, " "))
	}
	for i, o := range r.Objects() {
		if i > 0 {
			b.WriteString("---\n")
		}
		y, err := yaml.Marshal(o)
		if err != nil {
			return nil, err
		}
		b.Write(dropCreationTimestamp(y))
	}
	return b.Bytes(), nil
}

// flow shortens a rule's YAML for a comment.
func flow(y []byte) []byte { return bytes.ReplaceAll(y, []byte("\n- "), []byte(" ")) }

// dropCreationTimestamp removes the "creationTimestamp: null" metav1 writes for a zero time.
func dropCreationTimestamp(y []byte) []byte {
	return bytes.ReplaceAll(y, []byte("  creationTimestamp: null\n"), nil)
}
