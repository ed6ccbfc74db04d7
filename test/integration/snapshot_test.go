package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/opemu/opemu/internal/command"
	"github.com/opemu/opemu/test/internal/request"
)

// initialLists counts the requests of a client that (re)build an informer's state for
// ConfigMaps of one namespace: LISTs, and watch-lists (sendInitialEvents=true).
type initialLists struct {
	next  http.RoundTripper
	path  string
	count atomic.Int32
}

func (l *initialLists) RoundTrip(r *http.Request) (*http.Response, error) {
	q := r.URL.Query()
	if r.Method == http.MethodGet && r.URL.Path == l.path && (q.Get("watch") == "" || q.Get("sendInitialEvents") == "true") {
		l.count.Add(1)
	}
	return l.next.RoundTrip(r)
}

// snapshotCommand runs `opemu snapshot args...` (in this process, as main would) and returns
// its exit code and what it printed.
func snapshotCommand(args ...string) (int, string) {
	var out bytes.Buffer
	code := command.Run("test", append([]string{"snapshot"}, args...), func(string) (string, bool) { return "", false }, &out, &out)
	return code, out.String()
}

// configMaps is the server's ConfigMaps of namespace ns, as name → uid and data.
func configMaps(t *testing.T, cs kubernetes.Interface, ns string) map[string]string {
	t.Helper()
	list, err := cs.CoreV1().ConfigMaps(ns).List(context.Background(), metav1.ListOptions{})
	require.NoError(t, err)
	out := map[string]string{}
	for _, cm := range list.Items {
		out[cm.Name] = fmt.Sprint(cm.UID, cm.Data)
	}
	return out
}

// TestSnapshotInformer: `opemu snapshot save` while a client-go informer runs; the state
// changes; `opemu snapshot restore` puts it back. The informer, whose watch the restore ended
// with a 410, lists again and converges to the restored state: the deleted ConfigMap back with
// its uid, the changed one as it was, the new one gone, and resourceVersions newer than any it
// saw before.
func TestSnapshotInformer(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_LEADER_ELECTION=false")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(p.restConfig())
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "snap"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	for _, name := range []string{"a", "b"} {
		_, err := cs.CoreV1().ConfigMaps("snap").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{})
		require.NoError(t, err)
	}

	cfg := p.restConfig()
	lists := &initialLists{path: "/api/v1/namespaces/snap/configmaps"}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { lists.next = rt; return lists })
	factory := informers.NewSharedInformerFactoryWithOptions(kubernetes.NewForConfigOrDie(cfg), 0, informers.WithNamespace("snap"))
	informer := factory.Core().V1().ConfigMaps().Informer()
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }() // Shutdown waits for the informers, which end with ctx
	require.True(t, waitSynced(ctx, informer.HasSynced))
	informed := func() map[string]string {
		out := map[string]string{}
		for _, o := range informer.GetStore().List() {
			cm := o.(*corev1.ConfigMap)
			out[cm.Name] = fmt.Sprint(cm.UID, cm.Data)
		}
		return out
	}
	saved := configMaps(t, cs, "snap")
	require.Len(t, saved, 2)
	require.Eventually(t, func() bool { return fmt.Sprint(informed()) == fmt.Sprint(saved) }, 10*time.Second, 10*time.Millisecond)

	file := filepath.Join(t.TempDir(), "state.yaml")
	code, out := snapshotCommand("save", file, "--server", p.url(""))
	require.Equal(t, 0, code, out)
	assert.Regexp(t, `^saved \d+ objects at resourceVersion \d+ to `+regexp.QuoteMeta(file)+"\n$", out)

	require.NoError(t, cs.CoreV1().ConfigMaps("snap").Delete(ctx, "a", metav1.DeleteOptions{}))
	_, err = cs.CoreV1().ConfigMaps("snap").Update(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Data: map[string]string{"v": "2"}}, metav1.UpdateOptions{})
	require.NoError(t, err)
	last, err := cs.CoreV1().ConfigMaps("snap").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
	require.NoError(t, err)
	changed := configMaps(t, cs, "snap")
	require.NotEqual(t, saved, changed)
	require.Eventually(t, func() bool { return fmt.Sprint(informed()) == fmt.Sprint(changed) }, 10*time.Second, 10*time.Millisecond)
	before := lists.count.Load()

	code, out = snapshotCommand("restore", "--server", p.url(""), file)
	require.Equal(t, 0, code, out)
	assert.Regexp(t, `^restored: \d+ objects at resourceVersion \d+, clock \S+\n$`, out)
	assert.Equal(t, saved, configMaps(t, cs, "snap"), "the server holds the saved state")
	assert.Eventually(t, func() bool { return fmt.Sprint(informed()) == fmt.Sprint(saved) }, 10*time.Second, 10*time.Millisecond,
		"the informer converges to the restored state")
	assert.Greater(t, lists.count.Load(), before, "the informer listed again")
	for _, o := range informer.GetStore().List() {
		cm := o.(*corev1.ConfigMap)
		assert.Greater(t, rv(t, cm.ResourceVersion), rv(t, last.ResourceVersion), "%s: resourceVersions keep moving forward", cm.Name)
	}
}

func waitSynced(ctx context.Context, synced func() bool) bool {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for !synced() {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(5 * time.Millisecond):
		}
	}
	return true
}

func rv(t *testing.T, s string) uint64 {
	t.Helper()
	var n uint64
	_, err := fmt.Sscan(s, &n)
	require.NoError(t, err)
	return n
}

// statusOf sends req and returns the answer's code and body (a Status).
func statusOf(t *testing.T, req *http.Request) (int, map[string]any) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var st map[string]any
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	return resp.StatusCode, st
}

// TestSnapshotRoutes: what POST /snapshot answers (a YAML stream kubectl apply takes, offered
// as a file), and the Status of each bad request, after which the state is unchanged.
func TestSnapshotRoutes(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false")
	resp, err := http.Post(p.url("/snapshot?format=json"), "", nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "application/yaml", resp.Header.Get("Content-Type"))
	assert.Regexp(t, `^attachment; filename="opemu-snapshot-\d{8}-\d{6}\.json"$`, resp.Header.Get("Content-Disposition"))
	var body bytes.Buffer
	_, err = body.ReadFrom(resp.Body)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(body.String()), "\n")
	require.Greater(t, len(lines), 4)
	assert.Regexp(t, `^# opemu snapshot: \d+ objects at resourceVersion \d+$`, lines[0])
	assert.Regexp(t, `^# clock: \S+ real$`, lines[1])
	assert.Equal(t, "---", lines[2])
	assert.Contains(t, lines[3], `"kind":"CustomResourceDefinition"`, "CRDs first")
	assert.NotContains(t, body.String(), `"resourceVersion"`)
	assert.Contains(t, body.String(), `"snapshot.opemu.dev/uid"`)

	kube := p.url("/api/v1/namespaces/default/configmaps")
	code, _ := request.JSON(t, "POST", kube, `{"metadata":{"name":"stays"}}`)
	require.Equal(t, http.StatusCreated, code)
	for _, tc := range []struct {
		name, path, contentType, body string
		code                          int
		reason, message               string
	}{
		{"unknown format", "/snapshot?format=xml", "", "", 400, "BadRequest", `unknown snapshot format "xml": want yaml or json`},
		{"not YAML", "/snapshot/restore", "text/plain", "x", 415, "UnsupportedMediaType", "the body of the request was in an unknown format - accepted media types include: application/yaml, application/json"},
		{"not an object", "/snapshot/restore", "application/yaml", "- a\n", 400, "BadRequest", "snapshot: document 1: not an object"},
		{"bad clock", "/snapshot/restore?clock=maybe", "application/yaml", "", 400, "BadRequest", `invalid value "maybe" for the boolean query parameter "clock"`},
		{"unknown kind", "/snapshot/restore", "application/yaml", "apiVersion: v1\nkind: Nope\nmetadata:\n  name: x\n", 400, "BadRequest", `no kind v1 Nope is served`},
		{"invalid name", "/snapshot/restore", "application/yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: X_bad\n  namespace: default\n", 422, "Invalid", `ConfigMap "X_bad" is invalid: metadata.name`},
		{"GET", "/snapshot", "", "", 405, "MethodNotAllowed", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			method := "POST"
			if tc.name == "GET" {
				method = "GET"
			}
			req, err := http.NewRequest(method, p.url(tc.path), strings.NewReader(tc.body))
			require.NoError(t, err)
			if tc.contentType != "" {
				req.Header.Set("Content-Type", tc.contentType)
			}
			code, st := statusOf(t, req)
			assert.Equal(t, tc.code, code)
			assert.Equal(t, "Status", st["kind"])
			assert.Equal(t, tc.reason, st["reason"])
			assert.Contains(t, st["message"], tc.message)
		})
	}
	code, _ = request.JSON(t, "GET", kube+"/stays", "")
	assert.Equal(t, http.StatusOK, code, "no bad request changed the state")
}

// TestSnapshotLoad: a server started with LOAD serves the file's state from its first request,
// uids included; a LOAD that cannot be read stops the start as a configuration error.
func TestSnapshotLoad(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), "state.yaml")
	src := start(t, "ENABLE_LEADER_ELECTION=false")
	code, cm := request.JSON(t, "POST", src.url("/api/v1/namespaces/default/configmaps"), `{"metadata":{"name":"fixture","finalizers":["example.org/hold"]},"data":{"k":"v"}}`)
	require.Equal(t, http.StatusCreated, code)
	code, out := snapshotCommand("save", "--format", "json", "--server", src.url(""), file)
	require.Equal(t, 0, code, out)

	p := start(t, "ENABLE_LEADER_ELECTION=false", "LOAD="+file)
	loaded := request.Get(t, p.url("/api/v1/namespaces/default/configmaps/fixture"))
	md := loaded["metadata"].(map[string]any)
	assert.Equal(t, cm["metadata"].(map[string]any)["uid"], md["uid"])
	assert.Equal(t, []any{"example.org/hold"}, md["finalizers"])
	assert.Equal(t, map[string]any{"k": "v"}, loaded["data"])
	_, hasAnnotation := md["annotations"]
	assert.False(t, hasAnnotation, "the uid annotation went back to metadata.uid")

	for _, tc := range []struct{ name, content, want string }{
		{"missing", "", "invalid LOAD: open "},
		{"not objects", "- a\n", "invalid LOAD: " + file + "x: snapshot: document 1: not an object"},
	} {
		if tc.content != "" {
			require.NoError(t, os.WriteFile(file+"x", []byte(tc.content), 0o600))
		}
		_, err := command.Config(nil, func(k string) (string, bool) {
			if k == "LOAD" {
				return file + map[string]string{"missing": ".missing", "not objects": "x"}[tc.name], true
			}
			return "", false
		})
		require.Error(t, err, tc.name)
		assert.Contains(t, err.Error(), tc.want, tc.name)
	}
}

// TestSnapshotClockAndControllers: on CLOCK=manual a restore sets the clock back to the
// snapshot's time (clock=false leaves it), and the controllers reconcile every object again
// after it (a new term from a full list; no periodic resync here to do it otherwise).
func TestSnapshotClockAndControllers(t *testing.T) {
	t.Parallel()
	p := start(t, "CLOCK=manual", "ROLLOUT_STEP=0", "ENABLE_LEADER_ELECTION=false", "RECONCILE_INTERVAL=0")
	api := p.url("/apis/cloudnative.elide.dev/v1/namespaces/default/applications")
	code, _ := request.JSON(t, "POST", api, `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"a"},"spec":{"replicas":1,"image":"nginx:1.27"}}`)
	require.Equal(t, http.StatusCreated, code)
	require.Eventually(t, func() bool {
		st, _ := request.Get(t, api+"/a")["status"].(map[string]any)
		return st["phase"] == "Running"
	}, 10*time.Second, 10*time.Millisecond)
	saved := request.Get(t, p.url("/clock"))["now"].(string)
	file := filepath.Join(t.TempDir(), "state.yaml")
	code, out := snapshotCommand("save", "--server", p.url(""), file)
	require.Equal(t, 0, code, out)
	code, moved := request.JSON(t, "POST", p.url("/clock/advance"), `{"by":"1h"}`)
	require.Equal(t, http.StatusOK, code)

	before := reconciles(t, p.url(""))
	code, out = snapshotCommand("restore", "--keep-clock", "--server", p.url(""), file)
	require.Equal(t, 0, code, out)
	assert.NotContains(t, out, "set from the snapshot")
	assert.Equal(t, moved["now"], request.Get(t, p.url("/clock"))["now"], "--keep-clock: the clock stays")
	assert.Eventually(t, func() bool { return reconciles(t, p.url("")) > before }, 10*time.Second, 10*time.Millisecond,
		"the controller reconciles what the restore brought")

	before = reconciles(t, p.url(""))
	code, out = snapshotCommand("restore", "--server", p.url(""), file)
	require.Equal(t, 0, code, out)
	assert.Contains(t, out, "clock "+saved+" (set from the snapshot)")
	assert.Equal(t, saved, request.Get(t, p.url("/clock"))["now"], "the clock is the snapshot's again")
	assert.Eventually(t, func() bool { return reconciles(t, p.url("")) > before }, 10*time.Second, 10*time.Millisecond,
		"and again after the second restore")
}
