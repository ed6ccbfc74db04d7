package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/opemu/opemu/test/internal/request"
	"github.com/opemu/opemu/test/internal/tool"
)

// walkthrough returns the shell commands of the README's section under heading (by default
// "## A walkthrough with curl", with its subsections): every bash block, without the lines
// that start the server or stream forever (curl -N, a watch the README stops with Ctrl-C).
func walkthrough(t *testing.T, heading ...string) string {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(tool.Repo(t), "README.md"))
	require.NoError(t, err)
	text := string(readme)
	h := "## A walkthrough with curl"
	if len(heading) > 0 {
		h = heading[0]
	}
	start := strings.Index(text, h)
	require.GreaterOrEqual(t, start, 0)
	rest := text[start+len(h):]
	end := len(rest)
	level, _, _ := strings.Cut(h, " ") // "##" or "###": the section ends at a heading as high
	for l := "##"; len(l) <= len(level); l += "#" {
		if i := strings.Index(rest, "\n"+l+" "); i >= 0 && i < end {
			end = i
		}
	}
	section := text[start : start+len(h)+end]
	var script []string
	for _, m := range regexp.MustCompile("(?s)```bash\n(.*?)```").FindAllStringSubmatch(section, -1) {
		for _, line := range strings.Split(m[1], "\n") {
			if strings.Contains(line, "go run") || strings.Contains(line, "curl -N") || strings.Contains(line, "(Ctrl-C to stop)") {
				continue
			}
			script = append(script, line)
		}
	}
	return strings.Join(script, "\n")
}

// TestREADMEWalkthrough runs the README's curl walkthrough verbatim (but for the port) against
// the default, loopback-only setup: the request guard must not get in the way of curl.
func TestREADMEWalkthrough(t *testing.T) {
	t.Parallel()
	tool.Path(t, "curl")
	p := start(t, "ROLLOUT_STEP=0")
	script := strings.ReplaceAll(walkthrough(t), "127.0.0.1:3000", p.addr)
	require.Contains(t, script, "curl -i -X POST $API")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = tool.Repo(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the walkthrough failed:\n%s", out)
	o := string(out)
	for _, want := range []string{
		"HTTP/1.1 201 Created",     // the first create
		`"kind":"ApplicationList"`, // the list
		`"reason":"Conflict"`,      // the stale resourceVersion
		`"field":"spec.replicas"`,  // replicas > 100
		`"field":"spec.image"`,     // no image
		`"reason":"Forbidden"`,     // the blocked base image
		`"allowed":true`,           // /validate
		`"kind":"Scale"`,           // the scale subresource
		`"reason":"Cleanup"`,       // the operator's Events
	} {
		assert.True(t, strings.Contains(o, want), "the walkthrough's output lacks %s", want)
	}
	for _, refusal := range []string{"ALLOWED_HOSTS", "ALLOWED_ORIGINS", "Unauthorized"} {
		assert.False(t, strings.Contains(o, refusal), "the request guard refused a README command (%s)", refusal)
	}
}

// TestREADMEWebhookConfiguration takes the README's ValidatingWebhookConfiguration, fills its
// caBundle from a TLS=self-signed opemu as the README's command does, and calls the webhook the
// way kube-apiserver would: HTTPS to the configured URL, trusting only the caBundle.
func TestREADMEWebhookConfiguration(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(tool.Repo(t), "README.md"))
	require.NoError(t, err)
	m := regexp.MustCompile("(?s)### A real cluster's admission webhook.*?cat <<EOF[^\n]*\n(.*?)\nEOF\n").FindSubmatch(readme)
	require.NotNil(t, m, "the README's webhook configuration")
	dir := t.TempDir()
	// The cluster reaches opemu as opemu.example.internal; this test's listener is loopback, so
	// that name is allowed explicitly (the README's ADDR=:8443 listens on every interface).
	p := start(t, "TLS=self-signed", "TLS_DIR="+dir, "TLS_SANS=opemu.example.internal", "ALLOWED_HOSTS=opemu.example.internal", "ENABLE_CONTROLLER=false")
	caPEM, err := os.ReadFile(filepath.Join(dir, "ca.crt"))
	require.NoError(t, err)
	manifest := strings.Replace(string(m[1]), "$(base64 -w0 < /srv/opemu/tls/ca.crt)", base64.StdEncoding.EncodeToString(caPEM), 1)

	var cfg admissionregistrationv1.ValidatingWebhookConfiguration
	require.NoError(t, yaml.UnmarshalStrict([]byte(manifest), &cfg))
	require.Len(t, cfg.Webhooks, 1)
	wh := cfg.Webhooks[0]
	require.NotNil(t, wh.ClientConfig.URL)
	u, err := url.Parse(*wh.ClientConfig.URL)
	require.NoError(t, err)
	assert.Equal(t, "/validate", u.Path)
	assert.Equal(t, []string{"v1"}, wh.AdmissionReviewVersions)

	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(wh.ClientConfig.CABundle), "the caBundle is the CA")
	client := &http.Client{Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool}, // the server name is the URL's host
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, p.addr) // the cluster's DNS
		},
	}}
	review := func(image string) map[string]any {
		body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1",
		  "kind":{"group":"cloudnative.elide.dev","version":"v1","kind":"Application"},
		  "resource":{"group":"cloudnative.elide.dev","version":"v1","resource":"applications"},
		  "operation":"CREATE","userInfo":{"username":"system:admin"},
		  "object":{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"a"},"spec":{"replicas":1,"image":"` + image + `"}}}}`
		resp, err := client.Post(u.String(), "application/json", strings.NewReader(body))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var out map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&out))
		return out["response"].(map[string]any)
	}
	assert.Equal(t, true, review("nginx:1.27")["allowed"])
	denied := review("ubuntu:22.04")
	assert.Equal(t, false, denied["allowed"])
	assert.EqualValues(t, 403, denied["status"].(map[string]any)["code"])
}

// TestREADMESteppingThroughTheLoop runs the README's "Stepping through the loop" verbatim (but
// for the port) against CLOCK=manual: three failed attempts 1, 2 and 4 s apart on the clock,
// the rollout stepped to Running, each step one reconcile.
func TestREADMESteppingThroughTheLoop(t *testing.T) {
	t.Parallel()
	tool.Path(t, "curl")
	script := walkthrough(t, "### Stepping through the loop")
	require.Contains(t, script, "curl -X POST $B/controller/step")
	readme, err := os.ReadFile(filepath.Join(tool.Repo(t), "README.md"))
	require.NoError(t, err)
	require.Contains(t, strings.Split(string(readme), "### Stepping through the loop")[1], "CLOCK=manual go run .")
	p := start(t, "CLOCK=manual")
	script = strings.ReplaceAll(script, "127.0.0.1:3000", p.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = tool.Repo(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the README's loop failed:\n%s", out)
	o := string(out)
	assert.Equal(t, 3, strings.Count(o, `"result":"error"`), "three simulated failures:\n%s", o)
	assert.Equal(t, 3, strings.Count(o, `"result":"success"`), "then the rollout:\n%s", o)
	assert.Contains(t, o, `"message":"nothing to step: no key is due; 1 waiting, the next due in 1s`)
	assert.Contains(t, o, `"object":"default/stepper","state":"due"`)

	api := "http://" + p.addr + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	st := request.Get(t, api+"/stepper")["status"].(map[string]any)
	assert.Equal(t, "Running", st["phase"])
	assert.EqualValues(t, 2, st["readyReplicas"])
	h := request.History(t, api, "stepper")
	require.Len(t, h, 6)
	var gaps []time.Duration
	for i := 1; i < len(h); i++ {
		a, err := time.Parse(time.RFC3339Nano, h[i-1].(map[string]any)["startTime"].(string))
		require.NoError(t, err)
		b, err := time.Parse(time.RFC3339Nano, h[i].(map[string]any)["startTime"].(string))
		require.NoError(t, err)
		gaps = append(gaps, b.Sub(a))
	}
	assert.Equal(t, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, time.Second, time.Second}, gaps)
	paused, _, _ := request.Queue(t, "http://"+p.addr)
	assert.False(t, paused, "resumed at the end")
}

// TestREADMEKindsOperatorsUse runs the README's kubectl commands for the kinds of SPEC §14
// verbatim (but for the watch, which TestKubectlRollout follows): rollouts, a Job, and the
// garbage collection of owned ConfigMaps.
func TestREADMEKindsOperatorsUse(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_LEADER_ELECTION=false", "ROLLOUT_STEP=200ms", "JOB_DURATION=200ms")
	k := newKube(t, p)
	script := walkthrough(t, "## The kinds operators use")
	require.Contains(t, script, "kubectl create deployment web --image=nginx:1.27 --replicas=3")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Env, cmd.Dir = k.Env(), tool.Repo(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the README's commands failed:\n%s", out)
	for _, want := range []string{
		"deployment.apps/web created", `deployment "web" successfully rolled out`, "deployment.apps/web scaled",
		"out of 5 new replicas have been updated", "progressDeadlineSeconds: 600", "imagePullPolicy: IfNotPresent",
		"reason: NewReplicaSetAvailable", "configmap/settings created", "secret/creds created", "service/web created",
		"job.batch/once created", "job.batch/once condition met", "deployment.apps/web   5/5     5            5",
		"FIELD: strategy <DeploymentStrategy>", `deployment.apps "web" deleted`,
		`deployment.apps "api" deleted`, "api-a", "No resources found",
	} {
		assert.Contains(t, string(out), want)
	}
	// The orphaned ConfigMaps outlived their first owner; the foreground delete took them.
	assert.Regexp(t, `api-a\s+1\s+\d+s\napi-b\s+1\s+\d+s`, string(out))
	cms := k.Run("get", "configmaps", "-o", "name")
	assert.NotContains(t, cms, "api-a")
	assert.Contains(t, cms, "configmap/settings")
}

// TestREADMESnapshots runs the README's snapshot commands verbatim (but for the binary's path
// and the files, in the test's directory) against the built binary: save during the
// walkthrough, delete, restore, and `kubectl get all,apps -A` matches the saved state, uids
// included (the script's diff). Then a second binary started with LOAD serves the same state.
func TestREADMESnapshots(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_LEADER_ELECTION=false", "ROLLOUT_STEP=200ms")
	k := newKube(t, p)
	script := walkthrough(t, "## Snapshots: save, restore, fork")
	require.Contains(t, script, "./opemu snapshot save /tmp/demo.yaml")
	dir := t.TempDir()
	server := " --server http://" + p.addr
	script = strings.NewReplacer("./opemu snapshot save", binary+" snapshot save"+server,
		"./opemu snapshot restore", binary+" snapshot restore"+server, "/tmp/", dir+"/").Replace(script)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	cmd.Env, cmd.Dir = k.Env(), tool.Repo(t)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the README's snapshot commands failed:\n%s", out)
	o := string(out)
	assert.Regexp(t, `saved \d+ objects at resourceVersion \d+ to `+regexp.QuoteMeta(dir+"/demo.yaml"), o)
	assert.Regexp(t, `restored: \d+ objects at resourceVersion \d+, clock `, o)
	assert.Contains(t, o, "No resources found", "everything deleted before the restore")
	assert.Contains(t, o, "the same objects, the same uids")
	before, err := os.ReadFile(filepath.Join(dir, "before.txt"))
	require.NoError(t, err)
	for _, want := range []string{"Application", "Deployment", "Service"} {
		assert.Contains(t, string(before), want, "the compared state holds a %s", want)
	}

	// LOAD: a new server starts from the file.
	loaded := start(t, "ENABLE_LEADER_ELECTION=false", "LOAD="+filepath.Join(dir, "demo.yaml"))
	columns := "custom-columns=KIND:.kind,NS:.metadata.namespace,NAME:.metadata.name,UID:.metadata.uid"
	got := newKube(t, loaded).Run("get", "all,apps", "-A", "-o", columns)
	want := string(before)
	// The kubernetes Service and its endpoints are the listener's own: made again, not loaded.
	assert.Equal(t, withoutLine(want, "kubernetes"), withoutLine(got, "kubernetes"))
}

// withoutLine is s without the lines that contain word.
func withoutLine(s, word string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.Contains(l, word) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}
