package rbac

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/opemu/opemu/webhooks"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericrequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/component-helpers/auth/rbac/validation"
)

// RBAC's escalation checks, as kube-apiserver's RBAC storage makes them: a user may write a
// Role or ClusterRole only with every permission it grants (or the escalate verb on it), and a
// binding only with every permission of the role it binds (or the bind verb on that role).
// system:masters may do anything.

// Escalation returns the validating admission handler that makes the checks. It reads the
// writer from the request's context (k8s.io/apiserver's request.UserFrom); a write without one
// (opemu's own) is not checked.
func (a *Authorizer) Escalation() webhooks.Named {
	return webhooks.Named{
		Name:    "rbac-escalation",
		Handler: escalation{a},
		Matches: func(req *webhooks.Request) bool {
			if req.Resource.Group != rbacv1.GroupName || req.SubResource != "" || req.Internal {
				return false
			}
			if req.Operation != webhooks.Create && req.Operation != webhooks.Update {
				return false
			}
			switch req.Resource.Resource {
			case "roles", "clusterroles", "rolebindings", "clusterrolebindings":
				return true
			}
			return false
		},
	}
}

type escalation struct{ a *Authorizer }

// fullAuthority is what setting an aggregation rule takes, as in kube-apiserver.
var fullAuthority = []rbacv1.PolicyRule{
	{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"}},
	{Verbs: []string{"*"}, NonResourceURLs: []string{"*"}},
}

func (e escalation) Handle(ctx context.Context, req *webhooks.Request) webhooks.Response {
	u, ok := genericrequest.UserFrom(ctx)
	if !ok || slices.Contains(u.GetGroups(), user.SystemPrivilegedGroup) {
		return webhooks.Allowed()
	}
	if req.OldObject != nil && sameGrant(req.Object, req.OldObject) {
		return webhooks.Allowed()
	}
	gr := schema.GroupResource{Group: rbacv1.GroupName, Resource: req.Resource.Resource}
	var err error
	switch req.Resource.Resource {
	case "roles", "clusterroles":
		err = e.checkRole(ctx, u, req)
	default:
		err = e.checkBinding(ctx, u, req, gr)
	}
	var status apierrors.APIStatus
	switch {
	case err == nil:
		return webhooks.Allowed()
	case errors.As(err, &status):
		st := status.Status()
		return webhooks.Response{Result: &st}
	default:
		st := apierrors.NewForbidden(gr, req.Name, err).ErrStatus
		return webhooks.Response{Result: &st}
	}
}

// checkRole: the escalate verb on the role, or every permission it grants.
func (e escalation) checkRole(ctx context.Context, u user.Info, req *webhooks.Request) error {
	if e.allowed(ctx, u, "escalate", req.Resource.Resource, req.Namespace, req.Name) {
		return nil
	}
	var role rbacv1.ClusterRole // a Role's fields are a ClusterRole's but the aggregation rule
	if err := convert(req.Object, &role); err != nil {
		return err
	}
	if role.AggregationRule != nil {
		if err := e.confirmNoEscalation(ctx, u, req.Namespace, fullAuthority); err != nil {
			return errors.New("must have cluster-admin privileges to use the aggregationRule")
		}
	}
	return e.confirmNoEscalation(ctx, u, req.Namespace, role.Rules)
}

// checkBinding: the bind verb on the role the binding names, or every permission of that role.
func (e escalation) checkBinding(ctx context.Context, u user.Info, req *webhooks.Request, gr schema.GroupResource) error {
	var b rbacv1.RoleBinding // a ClusterRoleBinding's fields are a RoleBinding's
	if err := convert(req.Object, &b); err != nil {
		return err
	}
	resource := "clusterroles"
	if b.RoleRef.Kind == "Role" {
		resource = "roles"
	}
	if e.allowed(ctx, u, "bind", resource, req.Namespace, b.RoleRef.Name) {
		return nil
	}
	rules, err := e.a.roleRefRules(ctx, b.RoleRef, req.Namespace)
	if errors.As(err, new(errRoleNotFound)) {
		// Worded as kube-apiserver words it: the binding's resource, the role's name.
		return apierrors.NewNotFound(gr, b.RoleRef.Name)
	}
	if err != nil {
		return err
	}
	return e.confirmNoEscalation(ctx, u, req.Namespace, rules)
}

func (e escalation) allowed(ctx context.Context, u user.Info, verb, resource, namespace, name string) bool {
	d, _, _ := e.a.Authorize(ctx, authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: rbacv1.GroupName, APIVersion: "v1",
		Resource: resource, Namespace: namespace, Name: name, ResourceRequest: true})
	return d == authorizer.DecisionAllow
}

// confirmNoEscalation is kube-apiserver's: the user's rules in namespace cover rules, or the
// error lists what they lack.
func (e escalation) confirmNoEscalation(ctx context.Context, u user.Info, namespace string, rules []rbacv1.PolicyRule) error {
	owner, resolveErr := e.a.Rules(ctx, u, namespace)
	covered, missing := validation.Covers(owner, rules)
	if covered {
		return nil
	}
	seen := map[string]bool{}
	for _, r := range compactRules(missing) {
		seen[CompactString(r)] = true
	}
	msg := fmt.Sprintf("user %q (groups=%q) is attempting to grant RBAC permissions not currently held:\n%s",
		u.GetName(), u.GetGroups(), strings.Join(slices.Sorted(maps.Keys(seen)), "\n"))
	if resolveErr != nil {
		msg += fmt.Sprintf("; resolution errors: %v", []error{resolveErr})
	}
	return errors.New(msg)
}

// sameGrant reports whether an update leaves what obj grants as it was.
func sameGrant(obj, old map[string]any) bool {
	for _, f := range []string{"rules", "aggregationRule", "roleRef", "subjects"} {
		if !equality.Semantic.DeepEqual(obj[f], old[f]) {
			return false
		}
	}
	return true
}

func convert(obj map[string]any, into any) error {
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return json.Unmarshal(raw, into)
}
