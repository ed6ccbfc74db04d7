package main

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kubectlPath is the real kubectl of machines of this kind (a 1.32 dispatcher that runs the
// kubectl of the server's /version minor when it has one, and its own client for a 1.37 server).
const kubectlPath = "/usr/bin/kubectl"

// kube runs kubectl against one opemu with its own HOME, kubeconfig and cache directory.
type kube struct {
	t    *testing.T
	home string
}

func newKube(t *testing.T, p *proc) *kube {
	t.Helper()
	if _, err := os.Stat(kubectlPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("kubectl is required in CI and is missing at %s: %v", kubectlPath, err)
		}
		t.Skipf("kubectl not installed at %s", kubectlPath)
	}
	home := t.TempDir()
	out, err := exec.Command(binary, "kubeconfig", "--server", "http://"+p.addr).Output()
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(home, "kubeconfig"), out, 0o600))
	return &kube{t: t, home: home}
}

func (k *kube) cmd(ctx context.Context, args ...string) *exec.Cmd {
	args = append([]string{"--cache-dir", filepath.Join(k.home, "cache")}, args...)
	cmd := exec.CommandContext(ctx, kubectlPath, args...)
	cmd.Env = append(os.Environ(), "HOME="+k.home, "KUBECONFIG="+filepath.Join(k.home, "kubeconfig"))
	return cmd
}

// run runs kubectl and returns its combined output, failing the test on a non-zero exit.
func (k *kube) run(args ...string) string {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := k.cmd(ctx, args...).CombinedOutput()
	require.NoError(k.t, err, "kubectl %s:\n%s", strings.Join(args, " "), out)
	return string(out)
}

func TestKubectl(t *testing.T) {
	t.Parallel()
	p := start(t, "ROLLOUT_STEP=0", "ENABLE_LEADER_ELECTION=false")
	k := newKube(t, p)

	assert.Contains(t, k.run("version"), "Server Version: v1.37")
	res := k.run("api-resources")
	for _, want := range []string{"applications", "app,apps", "cloudnative.elide.dev/v1", "namespaces", "events", "leases", "customresourcedefinitions"} {
		assert.Contains(t, res, want)
	}

	assert.Contains(t, k.run("apply", "-f", "examples/application.yaml"), "application.cloudnative.elide.dev/demo created")
	assert.Contains(t, k.run("apply", "-f", "examples/application.yaml"), "unchanged")
	require.Eventually(t, func() bool { return strings.Contains(k.run("get", "app", "demo"), "Running") }, 10*time.Second, 50*time.Millisecond)
	get := k.run("get", "apps")
	assert.Regexp(t, `NAME\s+REPLICAS\s+READY\s+PHASE\s+AGE`, get)
	assert.Regexp(t, `demo\s+3\s+3\s+Running`, get)

	// get -w shows the change a patch makes, then we stop it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := k.cmd(ctx, "get", "app", "demo", "-w", "--output-watch-events")
	stdout, err := w.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, w.Start())
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	waitLine := func(sub string) {
		t.Helper()
		deadline := time.After(15 * time.Second)
		for {
			select {
			case l, ok := <-lines:
				require.True(t, ok, "kubectl get -w ended before %q", sub)
				if strings.Contains(l, sub) {
					return
				}
			case <-deadline:
				t.Fatalf("kubectl get -w never printed %q", sub)
			}
		}
	}
	waitLine("demo")
	assert.Contains(t, k.run("patch", "app", "demo", "--type=merge", "-p", `{"spec":{"replicas":4}}`), "patched")
	waitLine("MODIFIED")
	cancel()
	_ = w.Wait()

	assert.Contains(t, k.run("scale", "app", "demo", "--replicas=5"), "scaled")
	assert.Contains(t, k.run("label", "app", "demo", "tier=web"), "labeled")
	assert.Contains(t, k.run("get", "apps", "-l", "tier=web"), "demo")
	require.Eventually(t, func() bool {
		return strings.Contains(k.run("get", "app", "demo"), "5       Running") || strings.Contains(k.run("get", "app", "demo", "-o", "jsonpath={.status.readyReplicas}"), "5")
	}, 10*time.Second, 50*time.Millisecond)
	desc := k.run("describe", "app", "demo")
	assert.Contains(t, desc, "Events:")
	assert.Contains(t, desc, "FinalizerAdded")
	assert.Contains(t, k.run("explain", "applications.spec.replicas"), "Number of replicas")
	assert.Contains(t, k.run("get", "events"), "Created")

	assert.Contains(t, k.run("create", "namespace", "team-b"), "namespace/team-b created")
	assert.Contains(t, k.run("get", "ns"), "team-b")

	// A CRD applied at runtime serves its kind at once.
	assert.Contains(t, k.run("apply", "-f", "examples/widget-crd.yaml"), "created")
	assert.Contains(t, k.run("apply", "-f", "examples/widget.yaml"), "widget.example.com/w1 created")
	assert.Regexp(t, `w1\s+3`, k.run("get", "widgets"))
	assert.Regexp(t, `w1\s+3\s+blue`, k.run("get", "wd", "-o", "wide"))

	// Server-side apply: spec.replicas was last set by scale and patch, so taking it back needs
	// --force-conflicts, as on a real cluster.
	assert.Contains(t, k.run("apply", "--server-side", "--force-conflicts", "-f", "examples/application.yaml"), "serverside-applied")
	assert.Equal(t, "3", k.run("get", "app", "demo", "-o", "jsonpath={.spec.replicas}"))

	// delete waits for the controller's finalizer cleanup, then returns.
	assert.Contains(t, k.run("delete", "app", "demo", "--timeout=20s"), `"demo" deleted`)
	out, _ := k.cmd(context.Background(), "get", "app", "demo").CombinedOutput()
	assert.Contains(t, string(out), "NotFound")
}

// TestKubectlAuth: the checks tools make before acting (kubectl auth can-i, can-i --list, whoami;
// kubectl sends the reviews as protobuf) are answered: everything is allowed, and a client
// without credentials is system:anonymous.
func TestKubectlAuth(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false", "ENABLE_LEADER_ELECTION=false")
	k := newKube(t, p)
	assert.Equal(t, "yes\n", k.run("auth", "can-i", "create", "applications"))
	assert.Equal(t, "yes\n", k.run("auth", "can-i", "delete", "namespaces", "--all-namespaces"))
	assert.Equal(t, "yes\n", k.run("auth", "can-i", "get", "/healthz"))
	assert.Regexp(t, `(?m)^\*\.\*\s+\[\]\s+\[\]\s+\[\*\]$`, k.run("auth", "can-i", "--list"))
	who := k.run("auth", "whoami")
	assert.Regexp(t, `Username\s+system:anonymous`, who)
	assert.Regexp(t, `Groups\s+\[system:unauthenticated\]`, who)
}

// TestReviewsNameTheTokenUser: with tokens configured, the reviews name the token's user
// (client-go's typed clients, which send them as protobuf).
func TestReviewsNameTheTokenUser(t *testing.T) {
	t.Parallel()
	p := start(t, "TOKEN_FILE="+writeTokenFile(t), "ENABLE_CONTROLLER=false", "ENABLE_LEADER_ELECTION=false")
	rc := restConfig(p)
	rc.BearerToken = "alice-3f9c2a"
	cs, err := kubernetes.NewForConfig(rc)
	require.NoError(t, err)
	ctx := context.Background()
	who, err := cs.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.Equal(t, authenticationv1.UserInfo{Username: "alice", UID: "1001", Groups: []string{"developers", "ops", "system:authenticated"}}, who.Status.UserInfo)
	can, err := cs.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "delete", Resource: "namespaces"}},
	}, metav1.CreateOptions{})
	require.NoError(t, err)
	assert.True(t, can.Status.Allowed)
}

// TestKubectlExplainOpenAPIV2: `kubectl explain --output=plaintext-openapiv2` reads /openapi/v2
// (as protobuf) and explains the same schema v3 does.
func TestKubectlExplainOpenAPIV2(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false", "ENABLE_LEADER_ELECTION=false")
	k := newKube(t, p)
	out := k.run("explain", "--output=plaintext-openapiv2", "applications.spec")
	assert.Contains(t, out, "KIND:     Application")
	assert.Regexp(t, `replicas\s+<integer> -required-`, out)
	assert.Regexp(t, `config\s+<map\[string\]string>`, out)
	assert.Contains(t, out, "Number of replicas to run")
	assert.Regexp(t, `(?m)^\s+limits\s+<Object>$`, k.run("explain", "--output=plaintext-openapiv2", "app.spec", "--recursive"))

	// A CRD applied at runtime is explained too.
	k.run("apply", "-f", "examples/widget-crd.yaml")
	assert.Contains(t, k.run("explain", "--output=plaintext-openapiv2", "widgets.spec"), "KIND:     Widget")
}
