package policies_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/policies"
	"github.com/opemu/opemu/registry"
	"github.com/opemu/opemu/registry/registrytest"
	"github.com/opemu/opemu/webhooks"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/yaml"
)

// rig is a write path whose admission runs the policies of its store.
type rig struct {
	env      *registrytest.Env
	policies *policies.Policies
	client   *registry.Client
}

func newRig(t *testing.T) *rig {
	t.Helper()
	chain := &webhooks.Chain{}
	env := registrytest.New(t, registrytest.Options{Admission: chain})
	p, err := policies.New(policies.Config{Client: env.Registry.Client("opemu-policies"), Kinds: env.Kinds})
	require.NoError(t, err)
	chain.Configured = p
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = p.Run(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
	})
	return &rig{env: env, policies: p, client: env.Registry.Client("test")}
}

// create writes the object of doc (YAML) through the write path and returns its result.
func (r *rig) create(t *testing.T, ns, doc string) (registry.Result, error) {
	t.Helper()
	var obj map[string]any
	require.NoError(t, yaml.Unmarshal([]byte(doc), &obj))
	kind := map[string]string{
		"ValidatingAdmissionPolicy": "validatingadmissionpolicies", "ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings",
		"MutatingAdmissionPolicy": "mutatingadmissionpolicies", "MutatingAdmissionPolicyBinding": "mutatingadmissionpolicybindings",
		"Deployment": "deployments", "ConfigMap": "configmaps",
	}[obj["kind"].(string)]
	group := "admissionregistration.k8s.io"
	switch kind {
	case "deployments":
		group = "apps"
	case "configmaps":
		group = ""
	}
	key := cache.Key{Group: group, Resource: kind, Namespace: ns, Name: obj["metadata"].(map[string]any)["name"].(string)}
	target, err := r.env.Registry.TargetOf(key)
	require.NoError(t, err)
	return r.env.Registry.Create(context.Background(), target, obj, registry.Options{})
}

func (r *rig) mustCreate(t *testing.T, ns, doc string) {
	t.Helper()
	_, err := r.create(t, ns, doc)
	require.NoError(t, err)
}

// waitBound waits until the policies' watch has the given number of bindings in force.
func (r *rig) waitBound(t *testing.T, validating, mutating int) {
	t.Helper()
	require.Eventually(t, func() bool {
		v, m := r.policies.Bindings()
		return v == validating && m == mutating
	}, 10*time.Second, 2*time.Millisecond)
}

const replicasPolicy = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}]
  validations: [{expression: "object.spec.replicas <= 5"}]
`

func deployment(name string, replicas int) string {
	return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `}
spec:
  replicas: ` + map[int]string{3: "3", 7: "7"}[replicas] + `
  selector: {matchLabels: {app: a}}
  template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: nginx}]}}
`
}

func TestValidatingPolicyDenyAndWarn(t *testing.T) {
	r := newRig(t)
	r.mustCreate(t, "", replicasPolicy)
	// A policy no binding names judges nothing.
	_, err := r.create(t, "default", deployment("unbound", 7))
	require.NoError(t, err)

	r.mustCreate(t, "", `{apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingAdmissionPolicyBinding, metadata: {name: replicas}, spec: {policyName: replicas, validationActions: [Deny]}}`)
	r.waitBound(t, 1, 0)
	_, err = r.create(t, "default", deployment("big", 7))
	var se *apierrors.StatusError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, int32(http.StatusUnprocessableEntity), se.ErrStatus.Code)
	assert.Equal(t, `deployments.apps "big" is forbidden: ValidatingAdmissionPolicy 'replicas' with binding 'replicas' denied request: failed expression: object.spec.replicas <= 5`, se.ErrStatus.Message)
	_, err = r.create(t, "default", deployment("small", 3))
	require.NoError(t, err)

	// The binding changed to Warn: the write succeeds with kube's warning.
	key := cache.Key{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicybindings", Name: "replicas"}
	_, _, err = r.client.Delete(context.Background(), key, cache.Preconditions{})
	require.NoError(t, err)
	r.waitBound(t, 0, 0)
	r.mustCreate(t, "", `{apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingAdmissionPolicyBinding, metadata: {name: warn}, spec: {policyName: replicas, validationActions: [Warn]}}`)
	r.waitBound(t, 1, 0)
	res, err := r.create(t, "default", deployment("warned", 7))
	require.NoError(t, err)
	assert.Contains(t, res.Warnings, "Validation failed for ValidatingAdmissionPolicy 'replicas' with binding 'warn': failed expression: object.spec.replicas <= 5")
}

func TestValidatingPolicyParams(t *testing.T) {
	r := newRig(t)
	r.mustCreate(t, "", `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: max}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  validations:
  - expression: "object.spec.replicas <= int(params.data.max)"
    messageExpression: "'at most ' + params.data.max"
`)
	r.mustCreate(t, "default", `{apiVersion: v1, kind: ConfigMap, metadata: {name: limits}, data: {max: "4"}}`)
	r.mustCreate(t, "", `{apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingAdmissionPolicyBinding, metadata: {name: max},
  spec: {policyName: max, validationActions: [Deny], paramRef: {name: limits, parameterNotFoundAction: Deny}}}`)
	r.waitBound(t, 1, 0)
	_, err := r.create(t, "default", deployment("big", 7))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "denied request: at most 4")
	_, err = r.create(t, "default", deployment("small", 3))
	require.NoError(t, err)
	// Another namespace has no such parameter: Deny says so.
	_, err = r.create(t, "kube-public", deployment("elsewhere", 3))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "no params found for policy binding with `Deny` parameterNotFoundAction")
}

func TestMutatingPolicySetsLabel(t *testing.T) {
	r := newRig(t)
	r.mustCreate(t, "", `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: label}
spec:
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: "Object{metadata: Object.metadata{labels: {'policy': 'labelled'}}}"}
`)
	r.mustCreate(t, "", `{apiVersion: admissionregistration.k8s.io/v1, kind: MutatingAdmissionPolicyBinding, metadata: {name: label}, spec: {policyName: label}}`)
	r.waitBound(t, 0, 1)
	res, err := r.create(t, "default", `{apiVersion: v1, kind: ConfigMap, metadata: {name: cm, labels: {app: a}}}`)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"app": "a", "policy": "labelled"}, map[string]string(res.Object.Labels()))
}

func TestStatusControllerTypeChecks(t *testing.T) {
	r := newRig(t)
	c := policies.NewStatusController(r.env.Registry.Client(policies.StatusControllerName), r.env.Kinds, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = c.Run(ctx)
	}()
	defer func() {
		cancel()
		<-done
	}()
	r.mustCreate(t, "", `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: typo}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  validations: [{expression: "object.spec.replicass <= 5"}]
`)
	key := cache.Key{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies", Name: "typo"}
	var status map[string]any
	require.Eventually(t, func() bool {
		o, err := r.client.Get(context.Background(), key)
		require.NoError(t, err)
		m, err := o.Decode()
		require.NoError(t, err)
		status, _ = m["status"].(map[string]any)
		return status["observedGeneration"] != nil
	}, 10*time.Second, 2*time.Millisecond)
	warnings := status["typeChecking"].(map[string]any)["expressionWarnings"].([]any)
	require.Len(t, warnings, 1)
	w := warnings[0].(map[string]any)
	assert.Equal(t, "spec.validations[0].expression", w["fieldRef"])
	assert.Contains(t, w["warning"], "apps/v1, Kind=Deployment: ERROR: <input>:1:12: undefined field 'replicass'")
}

// TestValidatingPolicyReadsTheUsersGroups: request.userInfo carries the groups the user's
// authenticator gave (a ServiceAccount's, a certificate's O), not only system:authenticated.
func TestValidatingPolicyReadsTheUsersGroups(t *testing.T) {
	r := newRig(t)
	r.mustCreate(t, "", `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: admins-only}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations: [{expression: "'admins' in request.userInfo.groups", messageExpression: "request.userInfo.username + ' is not an admin'"}]
`)
	r.mustCreate(t, "", `{apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingAdmissionPolicyBinding, metadata: {name: admins-only}, spec: {policyName: admins-only, validationActions: [Deny]}}`)
	r.waitBound(t, 1, 0)
	for _, tc := range []struct {
		name    string
		groups  []string
		allowed bool
	}{
		{name: "alice", groups: []string{"admins", "system:authenticated"}, allowed: true},
		{name: "bob", groups: []string{"developers", "system:authenticated"}},
		{name: "carol"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := cache.Key{Resource: "configmaps", Namespace: "default", Name: tc.name}
			target, err := r.env.Registry.TargetOf(key)
			require.NoError(t, err)
			obj := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": tc.name}}
			_, err = r.env.Registry.Create(context.Background(), target, obj, registry.Options{User: tc.name, UserUID: tc.name + "-uid", UserGroups: tc.groups})
			if tc.allowed {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.name+" is not an admin")
		})
	}
}
