package integration

import (
	"bufio"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/request"
	"github.com/opemu/opemu/test/internal/tool"
)

// hookProc is a running example hook.
type hookProc struct {
	cmd  *exec.Cmd
	url  string
	mu   sync.Mutex
	out  strings.Builder
	done chan struct{}
}

var hookListeningRE = regexp.MustCompile(`listening on (http://\S+)`)

// startHook runs an example hook (interpreter, script) on port ("0": a free one) and waits for
// its "listening on URL" line.
func startHook(t *testing.T, interpreter, script, port string) *hookProc {
	t.Helper()
	cmd := exec.Command(interpreter, script)
	cmd.Env = append(os.Environ(), "PORT="+port)
	pipe, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	h := &hookProc{cmd: cmd, done: make(chan struct{})}
	first := make(chan string, 1)
	go func() {
		defer close(h.done)
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			select {
			case first <- sc.Text():
			default:
			}
			h.mu.Lock()
			h.out.WriteString(sc.Text() + "\n")
			h.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	t.Cleanup(h.stop)
	select {
	case line := <-first:
		m := hookListeningRE.FindStringSubmatch(line)
		require.NotNil(t, m, "the hook's first line must be `listening on URL`, got %q", line)
		h.url = m[1]
	case <-time.After(15 * time.Second):
		t.Fatalf("%s %s printed nothing within 15s", interpreter, script)
	}
	return h
}

// stop kills the hook and waits for it.
func (h *hookProc) stop() {
	_ = h.cmd.Process.Kill()
	<-h.done
}

func (h *hookProc) output() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.out.String()
}

// TestReconcileHooks runs the examples/hooks hooks, Python and Node, as a class would: kubectl
// creates the CRD, the Controller and a DatabaseCluster; the hook brings it to Ready with a
// ConfigMap it owns; a spec change re-syncs; while the hook is down the reconciles back off
// 1, 2, 4 s (the history shows it); deletion waits for the hook to say finalized; the
// collector then removes the ConfigMap.
func TestReconcileHooks(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, tool, script, controller, port string }{
		{"python", "python3", "examples/hooks/hook.py", "examples/hooks/controller-python.yaml", "8081"},
		{"node", "node", "examples/hooks/hook.js", "examples/hooks/controller-node.yaml", "8082"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			interpreter := tool.Path(t, tt.tool)
			p := start(t, "RECONCILE_INTERVAL=0")
			k := p.kubectl(t)
			hook := startHook(t, interpreter, filepath.Join(tool.Repo(t), tt.script), "0")
			port := hook.url[strings.LastIndex(hook.url, ":")+1 : len(hook.url)-1]

			k.Run("apply", "-f", "examples/hooks/databasecluster-crd.yaml")
			manifest, err := os.ReadFile(filepath.Join(tool.Repo(t), tt.controller))
			require.NoError(t, err)
			require.Contains(t, string(manifest), "127.0.0.1:"+tt.port)
			controller := strings.ReplaceAll(string(manifest), "127.0.0.1:"+tt.port, "127.0.0.1:"+port)
			k.Apply(controller)
			k.Run("apply", "-f", "examples/hooks/databasecluster.yaml")

			base := "http://" + p.addr
			api := base + "/apis/db.example.com/v1/namespaces/default/databaseclusters"
			db := func() map[string]any { return request.Get(t, api+"/orders-db") }
			st := func(obj map[string]any) map[string]any { s, _ := obj["status"].(map[string]any); return s }
			require.Eventually(t, func() bool { return st(db())["phase"] == "Ready" }, 20*time.Second, 50*time.Millisecond,
				"the hook's final phase; hook output:\n%s", hook.output())
			obj := db()
			assert.Equal(t, "orders-db.default.svc:5432", st(obj)["endpoint"])
			assert.EqualValues(t, 1, st(obj)["observedGeneration"])
			assert.Equal(t, []any{"controllers.opemu.dev/databaseclusters"}, obj["metadata"].(map[string]any)["finalizers"])
			assert.Contains(t, k.Run("get", "databaseclusters"), "Ready")

			cm := request.Get(t, base+"/api/v1/namespaces/default/configmaps/orders-db-config")
			assert.Equal(t, "500", cm["data"].(map[string]any)["storageGB"])
			refs := cm["metadata"].(map[string]any)["ownerReferences"].([]any)
			require.Len(t, refs, 1)
			ref := refs[0].(map[string]any)
			assert.Equal(t, "DatabaseCluster", ref["kind"])
			assert.Equal(t, "db.example.com/v1", ref["apiVersion"])
			assert.Equal(t, obj["metadata"].(map[string]any)["uid"], ref["uid"])
			assert.Equal(t, true, ref["controller"])
			reasons := eventReasons(t, base, "orders-db")
			assert.Contains(t, reasons, "Provisioning", "the hook's events")
			assert.Contains(t, reasons, "Ready")
			metrics := request.Metrics(t, base)
			for _, want := range []string{
				`controller_reconcile_total{controller="databaseclusters",result="success"}`,
				`workqueue_adds_total{name="databaseclusters"}`,
				`resource_phase_count{kind="DatabaseCluster",phase="Ready"} 1`,
			} {
				assert.True(t, strings.Contains(metrics, want), "/metrics lacks %s", want)
			}

			// A spec change re-syncs.
			k.Run("patch", "databasecluster", "orders-db", "--type=merge", "-p", `{"spec":{"storageGB":600}}`)
			require.Eventually(t, func() bool {
				cm := request.Get(t, base+"/api/v1/namespaces/default/configmaps/orders-db-config")
				return cm["data"].(map[string]any)["storageGB"] == "600" && fmt.Sprint(st(db())["observedGeneration"]) == "2"
			}, 10*time.Second, 50*time.Millisecond)

			// The hook goes down: reconciles fail and back off 1, 2, 4 s, visible in the history.
			// First the queue settles (the hook's planned requeues are done), so only the
			// retries of this failure follow.
			require.Eventually(t, func() bool {
				c := request.Get(t, base+"/controller?controller=databaseclusters")["controllers"].([]any)[0].(map[string]any)
				return len(c["queue"].([]any)) == 0
			}, 10*time.Second, 50*time.Millisecond)
			hook.stop()
			code, _ := request.JSON(t, "POST", api+"/orders-db/reconcile", "")
			require.Equal(t, http.StatusAccepted, code)
			var failed []time.Time
			require.Eventually(t, func() bool {
				failed = failedSince(t, api, "orders-db")
				return len(failed) >= 4
			}, 20*time.Second, 100*time.Millisecond)
			for i, want := range []time.Duration{time.Second, 2 * time.Second, 4 * time.Second} {
				gap := failed[i+1].Sub(failed[i])
				assert.True(t, gap >= want && gap < want+700*time.Millisecond, "retry %d came %v after the failure before it, want %v", i+1, gap, want)
			}
			synced := conditionOf(db(), "Synced")
			require.NotNil(t, synced)
			assert.Equal(t, "False", synced["status"])
			assert.Contains(t, synced["message"], "calling the hook")
			assert.Contains(t, eventReasons(t, base, "orders-db"), "ReconcileError")

			// Back up on the same port: the next reconcile succeeds.
			hook = startHook(t, interpreter, filepath.Join(tool.Repo(t), tt.script), port)
			code, _ = request.JSON(t, "POST", api+"/orders-db/reconcile", "")
			require.Equal(t, http.StatusAccepted, code)
			require.Eventually(t, func() bool {
				c := conditionOf(db(), "Synced")
				return c != nil && c["status"] == "True"
			}, 10*time.Second, 50*time.Millisecond)

			// Deletion waits for the hook to say finalized, then the ConfigMap is collected.
			k.Run("delete", "databasecluster", "orders-db", "--wait=false")
			require.Eventually(t, func() bool {
				code, obj := request.JSON(t, "GET", api+"/orders-db", "")
				return code == http.StatusOK && st(obj)["phase"] == "Deleting"
			}, 10*time.Second, 20*time.Millisecond, "the hook holds the deletion first")
			require.Eventually(t, func() bool {
				code, _ := request.JSON(t, "GET", api+"/orders-db", "")
				return code == http.StatusNotFound
			}, 10*time.Second, 50*time.Millisecond, "then says finalized; hook output:\n%s", hook.output())
			assert.Contains(t, hook.output(), "finalizing=")
			require.Eventually(t, func() bool {
				code, _ := request.JSON(t, "GET", base+"/api/v1/namespaces/default/configmaps/orders-db-config", "")
				return code == http.StatusNotFound
			}, 10*time.Second, 50*time.Millisecond, "the garbage collector removes the ConfigMap its owner left")
		})
	}
}

// failedSince returns the start times of the failed reconciles of name after its last
// success.
func failedSince(t *testing.T, api, name string) []time.Time {
	t.Helper()
	var out []time.Time
	for _, it := range request.History(t, api, name) {
		a := it.(map[string]any)
		if a["success"] == true {
			out = nil
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, a["startTime"].(string))
		require.NoError(t, err)
		out = append(out, at)
	}
	return out
}

// eventReasons returns the reasons of name's Events.
func eventReasons(t *testing.T, base, name string) []string {
	t.Helper()
	var out []string
	for _, e := range request.Get(t, base+"/events?name="+name)["events"].([]any) {
		out = append(out, e.(map[string]any)["reason"].(string))
	}
	return out
}

// conditionOf returns obj's status condition typ (nil when none).
func conditionOf(obj map[string]any, typ string) map[string]any {
	st, _ := obj["status"].(map[string]any)
	l, _ := st["conditions"].([]any)
	for _, c := range l {
		if m, _ := c.(map[string]any); m["type"] == typ {
			return m
		}
	}
	return nil
}
