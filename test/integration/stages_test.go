package integration

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/opemu/opemu/test/internal/request"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"sigs.k8s.io/yaml"
)

// kwokStage is the path of one of kwok's own Stage manifests (kustomize/stage/...), as its
// users apply them, in the kwok module opemu builds with.
func kwokStage(t *testing.T, rel string) string {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok").Output()
	require.NoError(t, err, "the kwok module's directory")
	path := filepath.Join(strings.TrimSpace(string(out)), "kustomize", "stage", rel)
	require.FileExists(t, path)
	return path
}

// TestKwokStageFailsLabelledPods is issue 29's acceptance for Stages, as kwok's users do it:
// kwok's default Pod stages are there; kwok's chaos Stage applied with kubectl makes the Pods
// labelled for it fail a second after they run, while others keep running; deleted, it no
// longer does.
func TestKwokStageFailsLabelledPods(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_LEADER_ELECTION=false", "ROLLOUT_STEP=0")
	k := p.kubectl(t)

	stages := k.Run("get", "stages")
	for _, name := range []string{"pod-ready", "pod-complete", "pod-delete"} {
		assert.Regexp(t, `(?m)^`+name+`\s`, stages, "kwok's default Pod stages are stored")
	}
	assert.Contains(t, k.Run("apply", "-f", kwokStage(t, "pod/chaos/pod-container-running-failed.yaml")),
		"stage.kwok.x-k8s.io/pod-container-running-failed created")

	const label = "pod-container-running-failed.stage.kwok.x-k8s.io=true"
	k.Run("run", "doomed", "--image=nginx", "--labels="+label)
	k.Run("run", "fine", "--image=nginx")
	phase := func(pod string) string {
		return k.Run("get", "pod", pod, "-o", "jsonpath={.status.phase} {.status.containerStatuses[0].state.terminated.reason} {.status.containerStatuses[0].state.terminated.exitCode}")
	}
	require.Eventually(t, func() bool { return phase("doomed") == "Failed containerFailed 1" }, 30*time.Second, 50*time.Millisecond,
		"the chaos Stage fails the labelled Pod: %s", phase("doomed"))
	assert.Equal(t, "Running  ", phase("fine"), "the other Pod runs on")
	assert.Regexp(t, `doomed\s+0/1\s+containerFailed\s`, k.Run("get", "pods"))
	hostIP := k.Run("get", "pod", "doomed", "-o", "jsonpath={.status.hostIP} {.status.podIP}")
	assert.Regexp(t, `^172\.18\.0\.2 10\.244\.0\.\d+$`, hostIP, "the chaos template's NodeIPWith and PodIPWith answer from the Node")

	// Without the Stage, a labelled Pod runs.
	assert.Contains(t, k.Run("delete", "stage", "pod-container-running-failed"), "deleted")
	k.Run("run", "spared", "--image=nginx", "--labels="+label)
	require.Eventually(t, func() bool { return phase("spared") == "Running  " }, 30*time.Second, 50*time.Millisecond)
	time.Sleep(1500 * time.Millisecond) // past the deleted Stage's delay: nothing fails it
	assert.Equal(t, "Running  ", phase("spared"))
}

// TestKwokStageDelayOnManualClock: a Stage's delay is on opemu's clock. With CLOCK=manual,
// kwok's pod-ready stage replaced (kubectl apply) by one that waits 30 s keeps a Deployment's
// Pods Pending, waiting in the pod controller's queue, until the clock is advanced by 30 s.
func TestKwokStageDelayOnManualClock(t *testing.T) {
	t.Parallel()
	p := start(t, "CLOCK=manual", "ROLLOUT_STEP=0", "ENABLE_LEADER_ELECTION=false", "RECONCILE_INTERVAL=0")
	base := "http://" + p.addr
	k := p.kubectl(t)

	raw, err := os.ReadFile(kwokStage(t, "pod/fast/pod-ready.yaml"))
	require.NoError(t, err)
	var stage map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &stage))
	stage["spec"].(map[string]any)["delay"] = map[string]any{"durationMilliseconds": 30000}
	manifest, err := yaml.Marshal(stage)
	require.NoError(t, err)
	k.Apply(string(manifest))
	assert.Equal(t, "30000", k.Run("get", "stage", "pod-ready", "-o", "jsonpath={.spec.delay.durationMilliseconds}"))

	advance := func(by string) time.Time {
		code, m := request.JSON(t, "POST", base+"/clock/advance", `{"by":"`+by+`"}`)
		require.Equal(t, http.StatusOK, code, "%v", m)
		at, err := time.Parse(time.RFC3339Nano, m["now"].(string))
		require.NoError(t, err)
		return at
	}
	// Ahead of the real clock, so a stamp of the real one cannot pass; less than the Node's 50 s
	// grace, so the node lifecycle controller cannot judge the Node before the kubelet's beat at
	// the new time (a jump of an hour could, and taint it until the next advance).
	start := advance("30s")
	k.Run("create", "deployment", "web", "--image=nginx", "--replicas=2")

	// waiting is the pod controller's queue: the Pods due at a time.
	waiting := func() map[string]string {
		m := request.Get(t, base+"/controller?controller=pod")
		out := map[string]string{}
		for _, it := range m["controllers"].([]any)[0].(map[string]any)["queue"].([]any) {
			item := it.(map[string]any)
			if item["state"] == "waiting" {
				out[item["object"].(string)], _ = item["due"].(string)
			}
		}
		return out
	}
	due := start.Add(30 * time.Second).UTC().Format(time.RFC3339Nano)
	require.Eventually(t, func() bool {
		w := waiting()
		n := 0
		for _, d := range w {
			if d == due {
				n++
			}
		}
		return n == 2
	}, 30*time.Second, 20*time.Millisecond, "both Pods wait for pod-ready, due 30 s on: %v", waiting())
	pending := regexp.MustCompile(`web-\S+\s+0/1\s+Pending\s`)
	assert.Len(t, pending.FindAllString(k.Run("get", "pods"), -1), 2)

	advance("29s")
	time.Sleep(300 * time.Millisecond) // time for a pass that should not run
	assert.Len(t, pending.FindAllString(k.Run("get", "pods"), -1), 2, "not due yet")

	advance("1s")
	running := regexp.MustCompile(`web-\S+\s+1/1\s+Running\s`)
	require.Eventually(t, func() bool { return len(running.FindAllString(k.Run("get", "pods"), -1)) == 2 }, 30*time.Second, 50*time.Millisecond)
	assert.Equal(t, start.Add(30*time.Second).UTC().Format(time.RFC3339), k.Run("get", "pods", "-o", "jsonpath={.items[0].status.startTime}"),
		"Now in the Stage's template is the manual clock's")
}
