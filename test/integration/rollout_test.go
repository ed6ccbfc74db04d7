package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/request"
)

// TestKubectlRollout: kubectl sees Deployments, StatefulSets and DaemonSets roll out and Jobs
// complete, as on a cluster: `get -w` shows READY climb, `rollout status` returns success after
// a create, a scale and a new image, a StatefulSet's Pods are named by ordinal and scaled down
// from the highest, a DaemonSet runs a Pod on the Node, `wait --for=condition=complete`
// returns for a Job whose Pod completed.
func TestKubectlRollout(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_LEADER_ELECTION=false", "ROLLOUT_STEP=200ms", "JOB_DURATION=300ms")
	k := p.kubectl(t)

	// Watch first, so that every step is seen: kubectl lists, then watches from the list's
	// version, so nothing created once its watch is open (watch_clients says so) is missed,
	// however slowly kubectl got there.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	watch := k.Cmd(ctx, "get", "deployments", "--watch")
	stdout, err := watch.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, watch.Start())
	defer func() { cancel(); _ = watch.Wait() }()
	lines := bufio.NewScanner(stdout)
	require.Eventually(t, func() bool {
		return strings.Contains(request.Metrics(t, p.url("")), `watch_clients{protocol="kubernetes"} 1`)
	}, 30*time.Second, 20*time.Millisecond, "kubectl get --watch is watching")

	assert.Contains(t, k.Run("create", "deployment", "web", "--image=nginx:1.27", "--replicas=3"), "deployment.apps/web created")
	ready := regexp.MustCompile(`^web\s+(\d)/3\s+(\d)\s+(\d)\s`)
	var seen []string
	for lines.Scan() {
		if strings.HasPrefix(lines.Text(), "NAME ") {
			continue // the header comes with the first object
		}
		m := ready.FindStringSubmatch(lines.Text())
		require.NotNil(t, m, "a watch line: %q", lines.Text())
		if len(seen) == 0 || seen[len(seen)-1] != m[1] {
			seen = append(seen, m[1])
		}
		if m[1] == "3" {
			break
		}
	}
	require.NotEmpty(t, seen)
	assert.Equal(t, "0", seen[0], "READY starts at 0: the Pods run ROLLOUT_STEP after they are bound")
	assert.Equal(t, "3", seen[len(seen)-1])
	assert.Regexp(t, `web-[a-z0-9]+\s+3\s+3\s+3\s`, k.Run("get", "rs"), "the Deployment's ReplicaSet runs its three Pods")
	assert.Len(t, strings.Fields(k.Run("get", "pods", "-l", "app=web", "--field-selector", "status.phase=Running", "-o", "name")), 3)

	assert.Contains(t, k.Run("rollout", "status", "deployment/web", "--timeout=30s"), `deployment "web" successfully rolled out`)
	assert.Contains(t, k.Run("scale", "deployment", "web", "--replicas=5"), "deployment.apps/web scaled")
	assert.Contains(t, k.Run("rollout", "status", "deployment/web", "--timeout=30s"), `deployment "web" successfully rolled out`)
	assert.Regexp(t, `web\s+5/5\s+5\s+5\s`, k.Run("get", "deployment", "web"))
	// Paused, the new template is observed and held at 0 updated replicas, so rollout status
	// sees the rollout in progress however slowly kubectl starts; resumed, it finishes.
	assert.Contains(t, k.Run("rollout", "pause", "deployment/web"), "paused")
	assert.Contains(t, k.Run("set", "image", "deployment/web", "nginx=nginx:1.28"), "image updated")
	status := k.Cmd(ctx, "rollout", "status", "deployment/web", "--timeout=30s")
	statusOut, err := status.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, status.Start())
	progress := bufio.NewScanner(statusOut)
	var out strings.Builder
	for progress.Scan() {
		out.WriteString(progress.Text() + "\n")
		if strings.Contains(progress.Text(), "new replicas have been updated...") {
			break
		}
	}
	assert.Contains(t, out.String(), "0 out of 5 new replicas have been updated...", "a new template is rolled out replica by replica")
	assert.Contains(t, k.Run("rollout", "resume", "deployment/web"), "resumed")
	for progress.Scan() {
		out.WriteString(progress.Text() + "\n")
	}
	require.NoError(t, status.Wait(), "rollout status:\n%s", out.String())
	assert.Contains(t, out.String(), `deployment "web" successfully rolled out`)
	describe := k.Run("describe", "deployment", "web")
	assert.Regexp(t, `Available\s+True\s+MinimumReplicasAvailable`, describe)
	assert.Regexp(t, `Progressing\s+True\s+NewReplicaSetAvailable`, describe)
	assert.Regexp(t, `Normal\s+ScalingReplicaSet\s+.*deployment-controller\s+Scaled (up|down) replica set web-`, describe)
	assert.Regexp(t, `\n1\s+<none>\n2\s+<none>`, k.Run("rollout", "history", "deployment/web"), "a revision per ReplicaSet")

	manifest := filepath.Join(t.TempDir(), "sts.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
spec:
  replicas: 2
  serviceName: db
  selector:
    matchLabels: {app: db}
  template:
    metadata:
      labels: {app: db}
    spec:
      containers:
      - name: db
        image: postgres:16
`), 0o600))
	assert.Contains(t, k.Run("apply", "-f", manifest), "statefulset.apps/db created")
	assert.Contains(t, k.Run("rollout", "status", "statefulset/db", "--timeout=30s"), "partitioned roll out complete: 2 new pods have been updated")
	assert.Regexp(t, `db\s+2/2\s`, k.Run("get", "statefulset", "db"))
	assert.Equal(t, "pod/db-0\npod/db-1", strings.TrimSpace(k.Run("get", "pods", "-l", "app=db", "-o", "name")), "Pods named by ordinal")
	revision := k.Run("get", "statefulset", "db", "-o", "jsonpath={.status.currentRevision}")
	assert.Regexp(t, `(?m)^`+revision+`\s+statefulset.apps/db\s+1\s`, k.Run("get", "controllerrevisions"))
	assert.Equal(t, revision+" "+revision, k.Run("get", "pods", "-l", "app=db", "-o", "jsonpath={.items[*].metadata.labels.controller-revision-hash}"))
	assert.Contains(t, k.Run("scale", "statefulset", "db", "--replicas=1"), "statefulset.apps/db scaled")
	require.Eventually(t, func() bool {
		return strings.TrimSpace(k.Run("get", "pods", "-l", "app=db", "-o", "name")) == "pod/db-0"
	}, 30*time.Second, 50*time.Millisecond, "a scale down takes the highest ordinal")

	manifest = filepath.Join(t.TempDir(), "ds.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: agent
spec:
  selector:
    matchLabels: {app: agent}
  template:
    metadata:
      labels: {app: agent}
    spec:
      containers:
      - name: agent
        image: fluentd:1
`), 0o600))
	assert.Contains(t, k.Run("apply", "-f", manifest), "daemonset.apps/agent created")
	assert.Contains(t, k.Run("rollout", "status", "daemonset/agent", "--timeout=30s"), `daemon set "agent" successfully rolled out`)
	assert.Regexp(t, `agent\s+1\s+1\s+1\s+1\s+1\s`, k.Run("get", "daemonset", "agent"))
	assert.Equal(t, "Running/opemu-control-plane", k.Run("get", "pods", "-l", "app=agent", "-o", "jsonpath={.items[*].status.phase}/{.items[*].spec.nodeName}"), "one Pod on the one Node")

	assert.Contains(t, k.Run("create", "job", "once", "--image=busybox:1.36", "--", "echo", "hi"), "job.batch/once created")
	assert.Contains(t, k.Run("wait", "--for=condition=complete", "job/once", "--timeout=30s"), "job.batch/once condition met")
	assert.Regexp(t, `once\s+Complete\s+1/1\s+\d+m?s`, k.Run("get", "job", "once"))
	assert.Regexp(t, `Normal\s+Completed\s+job/once\s+Job completed`, k.Run("get", "events", "--field-selector", "involvedObject.name=once"))
	assert.Regexp(t, `once-[a-z0-9]{5}\s+0/1\s+Completed\s`, k.Run("get", "pods", "-l", "job-name=once"), "the Job's Pod ran to completion")
}

// TestKubectlJobFails: a Job's Pod that fails (its status written as a kubelet would) fails
// the Job past its backoffLimit, as kube's Job controller has it; a deleted Job's running Pod
// is collected.
func TestKubectlJobFails(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_LEADER_ELECTION=false", "ROLLOUT_STEP=0", "JOB_DURATION=1h")
	k := p.kubectl(t)
	manifest := filepath.Join(t.TempDir(), "job.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte(`apiVersion: batch/v1
kind: Job
metadata:
  name: flaky
spec:
  backoffLimit: 0
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: c
        image: busybox:1.36
`), 0o600))
	assert.Contains(t, k.Run("apply", "-f", manifest), "job.batch/flaky created")
	assert.Contains(t, k.Run("wait", "--for=condition=Ready", "pod", "-l", "job-name=flaky", "--timeout=30s"), "condition met")
	pod := k.Run("get", "pods", "-l", "job-name=flaky", "-o", "jsonpath={.items[0].metadata.name}")
	assert.Equal(t, "batch.kubernetes.io/job-tracking", k.Run("get", "pod", pod, "-o", "jsonpath={.metadata.finalizers[*]}"))
	k.Run("patch", "pod", pod, "--subresource=status", "--type=merge", "-p", `{"status":{"phase":"Failed"}}`)
	assert.Contains(t, k.Run("wait", "--for=condition=failed", "job/flaky", "--timeout=30s"), "job.batch/flaky condition met")
	assert.Equal(t, "1 BackoffLimitExceeded", k.Run("get", "job", "flaky", "-o", `jsonpath={.status.failed} {.status.conditions[?(@.type=="Failed")].reason}`))
	assert.Empty(t, k.Run("get", "pod", pod, "-o", "jsonpath={.metadata.finalizers[*]}"), "counted: the finalizer is off")
	assert.Regexp(t, `Warning\s+BackoffLimitExceeded\s+job/flaky\s+Job has reached the specified backoff limit`, k.Run("get", "events", "--field-selector", "involvedObject.name=flaky"))

	// A running Job deleted (kubectl's background cascade): its Pod goes with it, its tracking
	// finalizer taken off.
	assert.Contains(t, k.Run("create", "job", "long", "--image=busybox:1.36", "--", "sleep", "3600"), "job.batch/long created")
	assert.Contains(t, k.Run("wait", "--for=condition=Ready", "pod", "-l", "job-name=long", "--timeout=30s"), "condition met")
	assert.Contains(t, k.Run("delete", "job", "long"), `job.batch "long" deleted`)
	require.Eventually(t, func() bool {
		return strings.TrimSpace(k.Run("get", "pods", "-l", "job-name=long", "-o", "name")) == ""
	}, 30*time.Second, 50*time.Millisecond, "the deleted Job's Pod is collected")
}

// TestKubectlCascade: `kubectl delete --cascade=background|foreground|orphan` of a Deployment
// owning two ConfigMaps, and the Warning of an owner in another namespace.
func TestKubectlCascade(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_LEADER_ELECTION=false")
	k := p.kubectl(t)
	dir := t.TempDir()
	// owned creates a Deployment and two ConfigMaps it owns (blockOwnerDeletion, as
	// SetControllerReference sets it), in ns.
	owned := func(ns, name string) {
		t.Helper()
		k.Run("create", "namespace", ns)
		k.Run("-n", ns, "create", "deployment", name, "--image=nginx:1.27")
		uid := k.Run("-n", ns, "get", "deployment", name, "-o", "jsonpath={.metadata.uid}")
		for _, cm := range []string{name + "-a", name + "-b"} {
			file := filepath.Join(dir, ns+"-"+cm+".yaml")
			require.NoError(t, os.WriteFile(file, fmt.Appendf(nil, `apiVersion: v1
kind: ConfigMap
metadata:
  name: %s
  ownerReferences:
  - {apiVersion: apps/v1, kind: Deployment, name: %s, uid: %s, controller: %t, blockOwnerDeletion: true}
data: {mode: fast}
`, cm, name, uid, strings.HasSuffix(cm, "-a")), 0o600))
			k.Run("-n", ns, "apply", "-f", file)
		}
	}
	configMaps := func(ns string) string {
		return strings.TrimSpace(k.Run("-n", ns, "get", "configmaps", "-o", `jsonpath={range .items[*]}{.metadata.name}:{.metadata.ownerReferences[*].name} {end}`))
	}

	owned("fg", "web")
	assert.Contains(t, k.Run("-n", "fg", "delete", "deployment", "web", "--cascade=foreground"), `deployment.apps "web" deleted`)
	assert.Empty(t, configMaps("fg"), "kubectl returns once the owner is gone, after its blocking dependents")

	owned("bg", "web")
	assert.Contains(t, k.Run("-n", "bg", "delete", "deployment", "web", "--cascade=background"), `deployment.apps "web" deleted`)
	require.Eventually(t, func() bool { return configMaps("bg") == "" }, 10*time.Second, 50*time.Millisecond, "the collector deletes the dependents after")

	owned("orphan", "web")
	assert.Contains(t, k.Run("-n", "orphan", "delete", "deployment", "web", "--cascade=orphan"), `deployment.apps "web" deleted`)
	assert.Equal(t, "web-a: web-b:", configMaps("orphan"), "the dependents stay, without their owner")

	// A ConfigMap naming the owner of another namespace: collected, with a Warning.
	owned("team-a", "api")
	uid := k.Run("-n", "team-a", "get", "deployment", "api", "-o", "jsonpath={.metadata.uid}")
	k.Run("create", "namespace", "team-b")
	file := filepath.Join(dir, "cross.yaml")
	require.NoError(t, os.WriteFile(file, fmt.Appendf(nil, `apiVersion: v1
kind: ConfigMap
metadata:
  name: cross
  namespace: team-b
  ownerReferences:
  - {apiVersion: apps/v1, kind: Deployment, name: api, uid: %s}
`, uid), 0o600))
	k.Run("apply", "-f", file)
	require.Eventually(t, func() bool {
		return strings.Contains(k.Run("get", "events", "-A", "--field-selector", "reason=OwnerRefInvalidNamespace"), "configmap/cross")
	}, 10*time.Second, 50*time.Millisecond)
	assert.Contains(t, k.Run("get", "events", "-n", "team-b", "--field-selector", "reason=OwnerRefInvalidNamespace"),
		fmt.Sprintf(`ownerRef [apps/v1/Deployment, namespace: team-b, name: api, uid: %s] does not exist in namespace "team-b"`, uid))
	require.Eventually(t, func() bool { return configMaps("team-b") == "" }, 10*time.Second, 50*time.Millisecond)
	assert.Equal(t, "api-a:api api-b:api", configMaps("team-a"), "the real owner's dependents are untouched")
}
