package integration

import (
	"bufio"
	"context"
	"os"
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

	"github.com/opemu/opemu/test/internal/tool"
)

func TestKubectl(t *testing.T) {
	t.Parallel()
	p := start(t, "ROLLOUT_STEP=0", "ENABLE_LEADER_ELECTION=false")
	k := p.kubectl(t)

	assert.Contains(t, k.Run("version"), "Server Version: v1.37")
	res := k.Run("api-resources")
	for _, want := range []string{"applications", "app,apps", "cloudnative.elide.dev/v1", "namespaces", "events", "leases", "customresourcedefinitions"} {
		assert.Contains(t, res, want)
	}

	assert.Contains(t, k.Run("apply", "-f", "examples/application.yaml"), "application.cloudnative.elide.dev/demo created")
	assert.Contains(t, k.Run("apply", "-f", "examples/application.yaml"), "unchanged")
	require.Eventually(t, func() bool { return strings.Contains(k.Run("get", "app", "demo"), "Running") }, 10*time.Second, 50*time.Millisecond)
	get := k.Run("get", "apps")
	assert.Regexp(t, `NAME\s+REPLICAS\s+READY\s+PHASE\s+AGE`, get)
	assert.Regexp(t, `demo\s+3\s+3\s+Running`, get)

	// get -w shows the change a patch makes, then we stop it.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w := k.Cmd(ctx, "get", "app", "demo", "-w", "--output-watch-events")
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
	assert.Contains(t, k.Run("patch", "app", "demo", "--type=merge", "-p", `{"spec":{"replicas":4}}`), "patched")
	waitLine("MODIFIED")
	cancel()
	_ = w.Wait()

	assert.Contains(t, k.Run("scale", "app", "demo", "--replicas=5"), "scaled")
	assert.Contains(t, k.Run("label", "app", "demo", "tier=web"), "labeled")
	assert.Contains(t, k.Run("get", "apps", "-l", "tier=web"), "demo")
	require.Eventually(t, func() bool {
		return strings.Contains(k.Run("get", "app", "demo"), "5       Running") || strings.Contains(k.Run("get", "app", "demo", "-o", "jsonpath={.status.readyReplicas}"), "5")
	}, 10*time.Second, 50*time.Millisecond)
	desc := k.Run("describe", "app", "demo")
	assert.Contains(t, desc, "Events:")
	assert.Contains(t, desc, "FinalizerAdded")
	assert.Contains(t, k.Run("explain", "applications.spec.replicas"), "Number of replicas")
	assert.Contains(t, k.Run("get", "events"), "Created")

	assert.Contains(t, k.Run("create", "namespace", "team-b"), "namespace/team-b created")
	assert.Contains(t, k.Run("get", "ns"), "team-b")

	// A CRD applied at runtime serves its kind at once.
	assert.Contains(t, k.Run("apply", "-f", "examples/widget-crd.yaml"), "created")
	assert.Contains(t, k.Run("apply", "-f", "examples/widget.yaml"), "widget.example.com/w1 created")
	assert.Regexp(t, `w1\s+3`, k.Run("get", "widgets"))
	assert.Regexp(t, `w1\s+3\s+blue`, k.Run("get", "wd", "-o", "wide"))

	// Server-side apply: spec.replicas was last set by scale and patch, so taking it back needs
	// --force-conflicts, as on a real cluster.
	assert.Contains(t, k.Run("apply", "--server-side", "--force-conflicts", "-f", "examples/application.yaml"), "serverside-applied")
	assert.Equal(t, "3", k.Run("get", "app", "demo", "-o", "jsonpath={.spec.replicas}"))

	// delete waits for the controller's finalizer cleanup, then returns.
	assert.Contains(t, k.Run("delete", "app", "demo", "--timeout=20s"), `"demo" deleted`)
	out, _ := k.Cmd(context.Background(), "get", "app", "demo").CombinedOutput()
	assert.Contains(t, string(out), "NotFound")
}

// TestKubectlBucketRules walks the README's "CRDs with validation rules" with kubectl: a CRD
// whose rule does not compile is refused naming it, as kube-apiserver refuses it; the Bucket's
// rules refuse a cross-field break, a change of an immutable field and a value named by a
// messageExpression; an update that keeps the rules is stored; deleting the CRD deletes its
// Buckets. The expected output is kubectl's against kube-apiserver v1.37.2 (the oracle), word
// for word.
func TestKubectlBucketRules(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false", "ENABLE_LEADER_ELECTION=false")
	k := p.kubectl(t)
	crd, err := os.ReadFile(filepath.Join(tool.Repo(t), "examples/bucket-crd.yaml"))
	require.NoError(t, err)
	broken := strings.Replace(string(crd), "rule: self.minReplicas <= self.maxReplicas", "rule: self.minReplicas <= self.maxReplica", 1)
	require.NotEqual(t, string(crd), broken)
	fails := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := k.Cmd(ctx, args...)
		if args[0] == "apply" && args[len(args)-1] == "-" {
			cmd.Stdin = strings.NewReader(broken)
		}
		out, err := cmd.CombinedOutput()
		require.Error(t, err, "kubectl %s succeeded:\n%s", strings.Join(args, " "), out)
		return string(out)
	}

	out := fails("apply", "-f", "-")
	assert.Contains(t, out, `The CustomResourceDefinition "buckets.storage.example.com" is invalid: spec.validation.openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule: Invalid value:`)
	assert.Contains(t, out, "compilation failed: ERROR: <input>:1:25: undefined field 'maxReplica'")

	assert.Contains(t, k.Run("apply", "-f", "examples/bucket-crd.yaml"), "created")
	assert.Contains(t, k.Run("apply", "-f", "examples/bucket.yaml"), "bucket.storage.example.com/photos created")
	assert.Regexp(t, `photos\s+eu-west-1\s+standard\s+2\s+4`, k.Run("get", "buckets"))

	out = fails("patch", "bucket", "photos", "--type=merge", "-p", `{"spec":{"minReplicas":9}}`)
	assert.Contains(t, out, `The Bucket "photos" is invalid: spec: Invalid value: minReplicas must not exceed maxReplicas`)
	out = fails("patch", "bucket", "photos", "--type=merge", "-p", `{"spec":{"region":"us-east-1"}}`)
	assert.Contains(t, out, `spec.region: Invalid value: "us-east-1": region is immutable`)
	out = fails("patch", "bucket", "photos", "--type=merge", "-p", `{"spec":{"storageClass":"hot"}}`)
	assert.Contains(t, out, `spec.storageClass: Invalid value: "hot": storage class hot is not standard or archive`)
	assert.Contains(t, k.Run("patch", "bucket", "photos", "--type=merge", "-p", `{"spec":{"maxReplicas":9,"storageClass":"archive"}}`), "patched")
	assert.Regexp(t, `photos\s+eu-west-1\s+archive\s+2\s+9`, k.Run("get", "buckets"))

	assert.Contains(t, k.Run("delete", "-f", "examples/bucket-crd.yaml", "--timeout=30s"), "deleted")
	out = fails("get", "buckets")
	assert.Contains(t, out, `Unable to list "storage.example.com/v1, Resource=buckets": the server could not find the requested resource`)
}

// TestKubectlVersions: a CRD with two versions (examples/crontab-crd.yaml) is read through
// either (`kubectl get crontabs.v2.stable.example.com`, and the short name through the
// preferred version, v2), each with its columns and v2 with its Warning; api-resources lists the
// preferred version. The expected output is kubectl's against kube-apiserver v1.37.2.
func TestKubectlVersions(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false", "ENABLE_LEADER_ELECTION=false")
	k := p.kubectl(t)
	assert.Contains(t, k.Run("apply", "-f", "examples/crontab-crd.yaml"), "created")
	assert.Contains(t, k.Run("apply", "-f", "examples/crontab.yaml"), "crontab.stable.example.com/nightly created")
	warning := "Warning: stable.example.com/v2 CronTab is an experiment; use stable.example.com/v1"
	for _, name := range []string{"crontabs.v2.stable.example.com", "ct"} {
		out := k.Run("get", name)
		assert.Contains(t, out, warning, name)
		assert.Regexp(t, `NAME\s+SCHEDULE\s+IMAGE\n\s*nightly\s+0 2 \* \* \*\s+busybox`, out, name)
	}
	out := k.Run("get", "crontabs.v1.stable.example.com")
	assert.NotContains(t, out, "Warning")
	assert.Regexp(t, `NAME\s+SCHEDULE\n\s*nightly\s+0 2 \* \* \*`, out)
	assert.Equal(t, "stable.example.com/v1", k.Run("get", "crontabs.v1.stable.example.com", "nightly", "-o", "jsonpath={.apiVersion}"))
	assert.Regexp(t, `crontabs\s+ct\s+stable.example.com/v2\s+true\s+CronTab`, k.Run("api-resources", "--api-group=stable.example.com"))
	assert.Equal(t, `["v1"]`, k.Run("get", "crd", "crontabs.stable.example.com", "-o", "jsonpath={.status.storedVersions}"))
}

// TestKubectlAuth: the checks tools make before acting (kubectl auth can-i, can-i --list, whoami;
// kubectl sends the reviews as protobuf) are answered: everything is allowed, and a client
// without credentials is system:anonymous.
func TestKubectlAuth(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false", "ENABLE_LEADER_ELECTION=false")
	k := p.kubectl(t)
	assert.Equal(t, "yes\n", k.Run("auth", "can-i", "create", "applications"))
	assert.Equal(t, "yes\n", k.Run("auth", "can-i", "delete", "namespaces", "--all-namespaces"))
	assert.Equal(t, "yes\n", k.Run("auth", "can-i", "get", "/healthz"))
	assert.Regexp(t, `(?m)^\*\.\*\s+\[\]\s+\[\]\s+\[\*\]$`, k.Run("auth", "can-i", "--list"))
	who := k.Run("auth", "whoami")
	assert.Regexp(t, `Username\s+system:anonymous`, who)
	assert.Regexp(t, `Groups\s+\[system:unauthenticated\]`, who)
}

// TestReviewsNameTheTokenUser: with tokens configured, the reviews name the token's user
// (client-go's typed clients, which send them as protobuf).
func TestReviewsNameTheTokenUser(t *testing.T) {
	t.Parallel()
	p := start(t, "TOKEN_FILE="+writeTokenFile(t), "ENABLE_CONTROLLER=false", "ENABLE_LEADER_ELECTION=false")
	rc := p.restConfig()
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
	k := p.kubectl(t)
	out := k.Run("explain", "--output=plaintext-openapiv2", "applications.spec")
	assert.Contains(t, out, "KIND:     Application")
	assert.Regexp(t, `replicas\s+<integer> -required-`, out)
	assert.Regexp(t, `config\s+<map\[string\]string>`, out)
	assert.Contains(t, out, "Number of replicas to run")
	assert.Regexp(t, `(?m)^\s+limits\s+<Object>$`, k.Run("explain", "--output=plaintext-openapiv2", "app.spec", "--recursive"))

	// A CRD applied at runtime is explained too.
	k.Run("apply", "-f", "examples/widget-crd.yaml")
	assert.Contains(t, k.Run("explain", "--output=plaintext-openapiv2", "widgets.spec"), "KIND:     Widget")
}
