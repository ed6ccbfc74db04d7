package integration

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDeployManifests: the manifests of deploy/ (README, "Running opemu for a team") pass
// `kubectl apply -k --dry-run=server` against opemu, the default (opemu and its etcd) and the
// external-etcd overlay, storing nothing; applied for real, with the two Secrets they read,
// opemu's controllers roll them out: the Deployment's three Pods Running and Ready on a Node,
// and the etcd StatefulSet's three members (opemu-etcd-0, -1, -2) Running and Ready. (The same dry runs against kube-apiserver v1.37 are
// recorded in the README; the oracle is not installed in CI.)
func TestDeployManifests(t *testing.T) {
	t.Parallel()
	s := start(t, "ROLLOUT_STEP=0", "ENABLE_LEADER_ELECTION=false")
	k := s.kubectl(t)
	k.Run("create", "namespace", "opemu")

	for dir, want := range map[string][]string{
		"deploy/": {"serviceaccount/opemu", "service/opemu", "deployment.apps/opemu", "poddisruptionbudget.policy/opemu",
			"service/opemu-etcd", "statefulset.apps/opemu-etcd", "poddisruptionbudget.policy/opemu-etcd"},
		"deploy/overlays/external-etcd/": {"serviceaccount/opemu", "service/opemu", "deployment.apps/opemu", "poddisruptionbudget.policy/opemu"},
	} {
		out := k.Run("apply", "-k", dir, "--dry-run=server")
		for _, obj := range want {
			assert.Contains(t, out, obj+" created (server dry run)", "%s", dir)
		}
		assert.Equal(t, len(want), strings.Count(out, "(server dry run)"), "%s: every object and nothing more:\n%s", dir, out)
	}
	assert.Contains(t, k.Run("-n", "opemu", "get", "deployments,statefulsets,services,serviceaccounts,poddisruptionbudgets"), "No resources found", "a dry run stores nothing")

	// For real: the Secrets first (any token file and certificate: nothing here reads them).
	k.Run("-n", "opemu", "create", "secret", "generic", "opemu-tokens", "--from-literal=tokens.csv=t0ken,admin,admin,\"system:masters\"")
	k.Run("-n", "opemu", "create", "secret", "generic", "opemu-tls", "--type=kubernetes.io/tls", "--from-literal=tls.crt=cert", "--from-literal=tls.key=key")
	out := k.Run("apply", "-k", "deploy/")
	assert.Contains(t, out, "deployment.apps/opemu created")
	assert.Contains(t, out, "statefulset.apps/opemu-etcd created")
	require.Contains(t, k.Run("-n", "opemu", "rollout", "status", "deployment/opemu", "--timeout=30s"), "successfully rolled out")
	require.Contains(t, k.Run("-n", "opemu", "rollout", "status", "statefulset/opemu-etcd", "--timeout=30s"), "roll out complete")
	assert.Equal(t, "3/3", k.Run("-n", "opemu", "get", "deployment", "opemu", "-o", "jsonpath={.status.readyReplicas}/{.spec.replicas}"))
	assert.Equal(t, "3/3", k.Run("-n", "opemu", "get", "statefulset", "opemu-etcd", "-o", "jsonpath={.status.readyReplicas}/{.spec.replicas}"))
	assert.Equal(t, "opemu-etcd-0/Running opemu-etcd-1/Running opemu-etcd-2/Running", strings.TrimSpace(k.Run("-n", "opemu", "get", "pods",
		"-l", "app.kubernetes.io/name=opemu-etcd", "-o", `jsonpath={range .items[*]}{.metadata.name}/{.status.phase} {end}`)), "the StatefulSet's Pods, by ordinal")
	pods := k.Run("-n", "opemu", "get", "pods", "-l", "app.kubernetes.io/name=opemu,app.kubernetes.io/component=apiserver",
		"-o", `jsonpath={range .items[*]}{.status.phase}/{.status.conditions[?(@.type=="Ready")].status}/{.spec.nodeName} {end}`)
	assert.Len(t, strings.Fields(pods), 3, "the Deployment's three Pods: %s", pods)
	for _, p := range strings.Fields(pods) {
		assert.Regexp(t, `^Running/True/\S+$`, p, "each Pod Running and Ready on a Node")
	}
	env := k.Run("-n", "opemu", "get", "deployment", "opemu", "-o", "jsonpath={.spec.template.spec.containers[0].env}")
	for _, want := range []string{`"name":"STORE","value":"etcd"`, `"fieldPath":"metadata.name"`, `"name":"TOKEN_FILE"`, `"name":"TLS_CERT_FILE"`} {
		assert.Contains(t, env, want)
	}
	assert.Contains(t, k.Run("apply", "-k", "deploy/"), "deployment.apps/opemu unchanged", "applying again changes nothing")
}
