package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"flag"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestModes builds opemu and the baseline, starts opemu twice (controller off for the API
// modes, on with ROLLOUT_STEP=0 for e2e and fanout) and the baseline once, and runs every mode
// briefly through run, as the command line would.
func TestModes(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts servers")
	}
	bins := buildServers(t)
	apiURL := startServer(t, filepath.Join(bins, "opemu"), nil, "ENABLE_CONTROLLER=false")
	ctrlURL := startServer(t, filepath.Join(bins, "opemu"), nil, "ROLLOUT_STEP=0")
	baseURL := startServer(t, filepath.Join(bins, "baseline"), []string{"-addr", "127.0.0.1:{port}"})

	t.Run("baseline serves opemu's shape", func(t *testing.T) { checkBaseline(t, baseURL) })

	tests := []struct {
		name    string
		args    []string
		wantErr bool
		check   func(t *testing.T, out []byte)
	}{
		{name: "api against opemu", args: []string{"-target", apiURL, "-duration", "300ms", "-conns", "4"},
			check: checkAPI(4)},
		{name: "api against the baseline", args: []string{"-target", baseURL, "-duration", "300ms", "-conns", "4"},
			check: checkAPI(4)},
		{name: "api by count with a list limit", args: []string{"-target", apiURL, "-n", "200", "-list-n", "10", "-list-limit", "50"},
			check: func(t *testing.T, out []byte) {
				res := decode[apiResult](t, out)
				require.Len(t, res.Phases, 5)
				for _, p := range res.Phases[:4] {
					assert.Equal(t, 200, p.Ops, p.Phase)
				}
				assert.Equal(t, 10, res.Phases[4].Ops)
				assert.Equal(t, 50, res.Phases[4].Items)
			}},
		{name: "api lists a seeded namespace", args: []string{"-target", baseURL, "-n", "20", "-phases", "list", "-list-items", "30"},
			check: func(t *testing.T, out []byte) {
				res := decode[apiResult](t, out)
				require.Len(t, res.Phases, 1)
				assert.Equal(t, 30, res.Phases[0].Items)
				assert.Zero(t, res.Phases[0].Errors)
			}},
		{name: "ab", args: []string{"-mode=ab", "-a", apiURL, "-b", baseURL, "-rounds", "2", "-duration", "200ms"},
			check: func(t *testing.T, out []byte) {
				res := decode[abResult](t, out)
				require.Len(t, res.Phases, 5)
				require.Len(t, res.ARuns, 2)
				require.Len(t, res.BRuns, 2)
				for _, p := range res.Phases {
					assert.Positive(t, p.AOpsPerSec, p.Phase)
					assert.Positive(t, p.BOpsPerSec, p.Phase)
					assert.InDelta(t, p.AOpsPerSec/p.BOpsPerSec, p.Ratio, 0.01, p.Phase)
					assert.Positive(t, p.AP99Ms, p.Phase)
					assert.Positive(t, p.BP99Ms, p.Phase)
					assert.Zero(t, p.AErrors+p.BErrors, p.Phase)
					// Both servers report their CPU; at 10 ms resolution, a busy phase of
					// 200 ms cannot read zero on both rounds.
					assert.Positive(t, p.AServerCPUPerOpUs, p.Phase)
					assert.Positive(t, p.BServerCPUPerOpUs, p.Phase)
				}
				assert.NotEqual(t, res.ARuns[0].Namespace, res.ARuns[1].Namespace)
			}},
		{name: "e2e", args: []string{"-mode=e2e", "-target", ctrlURL, "-n", "50", "-timeout", "30s"},
			check: func(t *testing.T, out []byte) {
				res := decode[e2eResult](t, out)
				assert.Equal(t, 50, res.Created)
				assert.Equal(t, 50, res.Ready)
				assert.Zero(t, res.CreateErrors)
				assert.False(t, res.TimedOut)
				assert.Positive(t, res.ReadyPerSec)
				assert.Positive(t, res.P99Ms)
				assert.GreaterOrEqual(t, res.Events, 50)
			}},
		{name: "e2e paced", args: []string{"-mode=e2e", "-target", ctrlURL, "-n", "10", "-rate", "50", "-conns", "2"},
			check: func(t *testing.T, out []byte) {
				res := decode[e2eResult](t, out)
				assert.Equal(t, 10, res.Ready)
				assert.GreaterOrEqual(t, res.Seconds, 0.18) // 10 creates at 50/s span 180 ms
			}},
		{name: "e2e fails when nothing becomes Ready", args: []string{"-mode=e2e", "-target", apiURL, "-n", "5", "-timeout", "300ms"},
			wantErr: true,
			check: func(t *testing.T, out []byte) {
				res := decode[e2eResult](t, out)
				assert.Equal(t, 5, res.Created)
				assert.Zero(t, res.Ready)
				assert.True(t, res.TimedOut)
			}},
		{name: "pods", args: []string{"-mode=pods", "-target", ctrlURL, "-n", "40", "-deployments", "4", "-idle", "0", "-timeout", "30s"},
			check: func(t *testing.T, out []byte) {
				res := decode[podsResult](t, out)
				assert.Equal(t, 110, res.NodePods, "one untainted Node of 110 Pods")
				assert.Equal(t, 40, res.Running)
				assert.Equal(t, 40, res.Deleted)
				assert.Zero(t, res.CreateErrors+res.DeleteErrors)
				assert.Empty(t, res.TimedOut)
				assert.Positive(t, res.RunningPerSec)
				assert.Positive(t, res.DeletedPerSec)
				assert.Positive(t, res.RSSIdleMiB)
				assert.GreaterOrEqual(t, res.RunningSeconds, res.CreatedSeconds)
				assert.GreaterOrEqual(t, res.Events, 3*40, "each Pod's ADDED, Running and DELETED at least")
			}},
		{name: "pods refuses more Pods than the Nodes hold", args: []string{"-mode=pods", "-target", ctrlURL, "-n", "111"},
			wantErr: true,
			check: func(t *testing.T, out []byte) {
				assert.Empty(t, out, "nothing is created")
			}},
		{name: "fanout", args: []string{"-mode=fanout", "-target", ctrlURL, "-clients", "20", "-rate", "20", "-duration", "1s"},
			check: func(t *testing.T, out []byte) {
				res := decode[fanoutResult](t, out)
				assert.Equal(t, 20, res.Changes)
				assert.Zero(t, res.WriteErrors)
				assert.Equal(t, int64(20*20), res.Expected)
				assert.Equal(t, res.Expected, res.Received)
				assert.Zero(t, res.Lost)
				assert.Zero(t, res.Duplicates)
				assert.Zero(t, res.ClientsEnded)
				assert.Positive(t, res.P99FromSendMs)
				assert.Positive(t, res.Stalled.Bytes, "the stalled client had frames waiting")
			}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out, errOut bytes.Buffer
			err := run(ctx, append(tc.args, "-json"), &out, &errOut)
			if tc.wantErr {
				require.Error(t, err)
			} else {
				require.NoError(t, err, "stdout: %s\nstderr: %s", out.String(), errOut.String())
			}
			tc.check(t, out.Bytes())
		})
	}
}

// TestRunRejects covers what fails before any request: help, bad flags, an unreachable target.
func TestRunRejects(t *testing.T) {
	t.Parallel()
	dead := "http://" + freeAddr(t)
	tests := []struct {
		name string
		args []string
		is   error
	}{
		{name: "help", args: []string{"-h"}, is: flag.ErrHelp},
		{name: "unknown mode", args: []string{"-mode=soak"}},
		{name: "get without create", args: []string{"-phases", "get"}},
		{name: "unknown phase", args: []string{"-phases", "create,delete"}},
		{name: "no connections", args: []string{"-conns", "0"}},
		{name: "stray argument", args: []string{"extra"}},
		{name: "unreachable target", args: []string{"-target", dead, "-n", "1"}},
		{name: "unreachable e2e target", args: []string{"-mode=e2e", "-target", dead, "-n", "1"}},
		{name: "more Deployments than Pods", args: []string{"-mode=pods", "-n", "2", "-deployments", "3"}},
		{name: "unreachable pods target", args: []string{"-mode=pods", "-target", dead, "-n", "1"}},
		{name: "unreachable fanout target", args: []string{"-mode=fanout", "-target", dead, "-clients", "1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var out bytes.Buffer
			err := run(context.Background(), tc.args, &out, io.Discard)
			require.Error(t, err)
			if tc.is != nil {
				require.ErrorIs(t, err, tc.is)
			}
			assert.Empty(t, out.String())
		})
	}
}

func TestSSEReader(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 20<<10) // longer than the reader's buffer
	stream := "retry: 2000\n\n" +
		": ping\n\n" +
		"id: 7\ndata: {\"type\":\"ADDED\",\"object\":{}}\n\n" +
		"id: 8\r\ndata: {\"type\":\"MODIFIED\",\"object\":{\"v\":\"" + long + "\"}}\r\n\r\n" +
		"id: 9\ndata: a\ndata: b\n\n" +
		"id:\ndata: {\"type\":\"ERROR\",\"object\":{\"code\":410}}\n\n"
	want := []sseFrame{
		{Retry: true},
		{HasID: true, ID: 7, Data: []byte(`{"type":"ADDED","object":{}}`)},
		{HasID: true, ID: 8, Data: []byte(`{"type":"MODIFIED","object":{"v":"` + long + `"}}`)},
		{HasID: true, ID: 9, Data: []byte("a\nb")},
		{HasID: true, Error: true, Data: []byte(`{"type":"ERROR","object":{"code":410}}`)},
	}
	for _, keep := range []bool{true, false} {
		t.Run("keepData="+strconv.FormatBool(keep), func(t *testing.T) {
			r := newSSEReader(strings.NewReader(stream), keep)
			for i, w := range want {
				f, err := r.next()
				require.NoError(t, err, "frame %d", i)
				if !keep {
					w.Data = nil
				}
				f.Data = bytes.Clone(f.Data)
				assert.Equal(t, w, f, "frame %d", i)
			}
			_, err := r.next()
			require.ErrorIs(t, err, io.EOF)
		})
	}
	t.Run("ends inside a frame", func(t *testing.T) {
		_, err := newSSEReader(strings.NewReader("id: 1\ndata: {"), false).next()
		require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	})
	t.Run("bad id", func(t *testing.T) {
		_, err := newSSEReader(strings.NewReader("id: x\n\n"), false).next()
		require.Error(t, err)
	})
}

func TestWatchReader(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 40<<10) // longer than the reader's buffer
	stream := `{"type":"ADDED","object":{"kind":"ConfigMap","metadata":{"name":"a","resourceVersion":"7"}}}` + "\n" +
		"\n" +
		`{"type":"MODIFIED","object":{"apiVersion":"v1","data":{"resourceVersion":"1"},"metadata":{"resourceVersion":"8"}}}` + "\r\n" +
		`{"type":"MODIFIED","object":{"metadata":{"resourceVersion":"9"},"data":{"k":"` + long + `"}}}` + "\n" +
		`{"type":"MODIFIED","object":{"data":{"k":"` + long + `"},"metadata":{"resourceVersion":"10"}}}` + "\n" +
		`{"type":"ERROR","object":{"kind":"Status","code":410}}` + "\n"
	want := []kubeEvent{
		{HasRV: true, RV: 7},
		{HasRV: true, RV: 8},
		{HasRV: true, RV: 9},
		{}, // its resourceVersion lies beyond the first 16 KiB
		{Error: true},
	}
	r := newWatchReader(strings.NewReader(stream))
	for i, w := range want {
		ev, err := r.next()
		require.NoError(t, err, "event %d", i)
		assert.Equal(t, w, ev, "event %d", i)
	}
	_, err := r.next()
	require.ErrorIs(t, err, io.EOF)
	_, err = newWatchReader(strings.NewReader(`{"type":"ADDED"`)).next()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
	_, err = newWatchReader(strings.NewReader(`{"type":"ADDED","object":{"data":{"k":"` + long)).next()
	require.ErrorIs(t, err, io.ErrUnexpectedEOF)
}

func TestStats(t *testing.T) {
	t.Parallel()
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := []struct {
		name string
		in   []time.Duration
		want latencySummary
	}{
		{name: "empty", in: nil, want: latencySummary{}},
		{name: "one", in: ms(3), want: latencySummary{P50Ms: 3, P99Ms: 3, MaxMs: 3}},
		{name: "unsorted", in: ms(5, 1, 4, 2, 3), want: latencySummary{P50Ms: 3, P99Ms: 5, MaxMs: 5}},
		{name: "hundred", in: ms(seq(100)...), want: latencySummary{P50Ms: 50, P99Ms: 99, MaxMs: 100}},
		{name: "negative", in: ms(-2, 1), want: latencySummary{P50Ms: -2, P99Ms: 1, MaxMs: 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, summarize(tc.in))
		})
	}
	assert.InDelta(t, 2.5, median([]float64{4, 1, 3, 2}), 1e-9)
	assert.InDelta(t, 3.0, median([]float64{5, 3, 1}), 1e-9)
	assert.Zero(t, median(nil))
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

// checkBaseline walks the baseline through create, conflict, get, replace and list.
func checkBaseline(t *testing.T, base string) {
	ns := "baseline-check"
	apps := appsURL(base, ns)
	steps := []struct {
		name, method, url, body string
		code                    int
	}{
		{"create b", http.MethodPost, apps, string(appBody("b", ns, 3)), http.StatusCreated},
		{"create a", http.MethodPost, apps, string(appBody("a", ns, 3)), http.StatusCreated},
		{"create again", http.MethodPost, apps, string(appBody("a", ns, 3)), http.StatusConflict},
		{"no name", http.MethodPost, apps, `{"metadata":{}}`, http.StatusBadRequest},
		{"not JSON", http.MethodPost, apps, `[`, http.StatusBadRequest},
		{"get", http.MethodGet, apps + "/a", "", http.StatusOK},
		{"get missing", http.MethodGet, apps + "/zz", "", http.StatusNotFound},
		{"replace", http.MethodPut, apps + "/a", string(appBody("a", ns, 5)), http.StatusOK},
		{"replace missing", http.MethodPut, apps + "/zz", string(appBody("zz", ns, 5)), http.StatusNotFound},
		{"patch", http.MethodPatch, apps + "/b", `{"spec":{"replicas":7,"image":null}}`, http.StatusOK},
		{"patch missing", http.MethodPatch, apps + "/zz", `{"spec":{"replicas":7}}`, http.StatusNotFound},
		{"health", http.MethodGet, base + "/healthz", "", http.StatusOK},
	}
	got := map[string]map[string]any{}
	for _, s := range steps {
		req, err := http.NewRequest(s.method, s.url, strings.NewReader(s.body))
		require.NoError(t, err)
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.NoError(t, err)
		require.Equal(t, s.code, resp.StatusCode, "%s: %s", s.name, body)
		var obj map[string]any
		if json.Unmarshal(body, &obj) == nil {
			got[s.name] = obj
		}
	}
	created, replaced := got["create a"]["metadata"].(map[string]any), got["replace"]["metadata"].(map[string]any)
	assert.Equal(t, ns, created["namespace"])
	assert.NotEmpty(t, created["uid"])
	assert.NotEmpty(t, created["creationTimestamp"])
	assert.Equal(t, created["uid"], replaced["uid"])
	assert.Equal(t, created["creationTimestamp"], replaced["creationTimestamp"])
	assert.NotEqual(t, created["resourceVersion"], replaced["resourceVersion"])
	assert.Equal(t, got["create a"], got["get"])
	assert.EqualValues(t, 5, got["replace"]["spec"].(map[string]any)["replicas"])
	assert.Equal(t, map[string]any{"replicas": 7.0}, got["patch"]["spec"], "a merge patch merges, null removes")
	assert.Equal(t, got["create b"]["metadata"].(map[string]any)["uid"], got["patch"]["metadata"].(map[string]any)["uid"])
	cpu, ok := readServerCPU(context.Background(), nil, base)
	assert.True(t, ok, "the baseline reports its CPU")
	assert.Positive(t, cpu)

	body, err := do(context.Background(), http.DefaultClient, http.MethodGet, apps, "", nil, true)
	require.NoError(t, err)
	var list struct {
		APIVersion, Kind string
		Metadata         struct{ ResourceVersion string }
		Items            []struct{ Metadata struct{ Name string } }
	}
	require.NoError(t, json.Unmarshal(body, &list))
	assert.Equal(t, "cloudnative.elide.dev/v1", list.APIVersion)
	assert.Equal(t, "ApplicationList", list.Kind)
	assert.NotEmpty(t, list.Metadata.ResourceVersion)
	require.Len(t, list.Items, 2)
	assert.Equal(t, "a", list.Items[0].Metadata.Name)
	assert.Equal(t, "b", list.Items[1].Metadata.Name)
}

func checkAPI(conns int) func(t *testing.T, out []byte) {
	return func(t *testing.T, out []byte) {
		res := decode[apiResult](t, out)
		assert.Equal(t, conns, res.Conns)
		require.Len(t, res.Phases, 5)
		for i, want := range []string{"create", "get", "update", "patch", "list"} {
			p := res.Phases[i]
			assert.Equal(t, want, p.Phase)
			assert.Positive(t, p.Ops, want)
			assert.Positive(t, p.OpsPerSec, want)
			assert.Positive(t, p.P99Ms, want)
			assert.GreaterOrEqual(t, p.P99Ms, p.P50Ms, want)
			assert.Zero(t, p.Errors, "%s: %s", want, p.FirstError)
			assert.GreaterOrEqual(t, p.ServerCPUPerOpUs, 0.0, "%s: the server reports its CPU", want)
		}
		assert.Equal(t, res.Phases[0].Ops, res.Phases[4].Items, "the list holds every created object")
	}
}

func decode[T any](t *testing.T, out []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(out, &v), "output: %s", out)
	return v
}

// buildServers builds opemu and the baseline into a temporary directory and returns it.
func buildServers(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	gotool := filepath.Join(runtime.GOROOT(), "bin", "go")
	if p, err := exec.LookPath("go"); err == nil {
		gotool = p
	}
	dir := t.TempDir()
	cmd := exec.Command(gotool, "build", "-o", dir+string(filepath.Separator), "github.com/opemu/opemu", "./examples/load/baseline")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	return dir
}

// startServer starts bin on a free port ("{port}" in args is replaced by it, and PORT is set),
// waits for /readyz to answer 200, and kills the process when the test ends. env adds to the
// test's environment; with TLS=self-signed in it, the URL is https (readiness is polled
// without checking the certificate: the test checks it through the load tool).
func startServer(t *testing.T, bin string, args []string, env ...string) string {
	t.Helper()
	addr := freeAddr(t)
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	for i := range args {
		args[i] = strings.ReplaceAll(args[i], "{port}", port)
	}
	logPath := filepath.Join(t.TempDir(), filepath.Base(bin)+".log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "ADDR=", "PORT="+port, "ENABLE_LEADER_ELECTION=false", "LOG_LEVEL=warn")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		_ = logFile.Close()
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("%s %v log:\n%s", bin, env, b[max(len(b)-4096, 0):])
		}
	})
	url, client := "http://"+addr, http.DefaultClient
	if slices.Contains(env, "TLS=self-signed") {
		url = "https://" + addr
		client = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	}
	// /readyz, not /healthz: with STORE=etcd /healthz answers while opemu still waits for etcd
	// (election is off, so a wired opemu is ready). The baseline has no /readyz: its /healthz.
	status := func(path string) int {
		resp, err := client.Get(url + path)
		if err != nil {
			return 0
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	require.Eventually(t, func() bool {
		switch status("/readyz") {
		case http.StatusOK:
			return true
		case http.StatusNotFound:
			return status("/healthz") == http.StatusOK
		}
		return false
	}, 20*time.Second, 20*time.Millisecond, "%s did not become ready", bin)
	return url
}

// freeAddr returns a loopback address nothing listens on (just now).
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// TestEtcdMode runs the etcd mode briefly: opemu with STORE=etcd over
// an etcd started for the test, against raw puts of the same objects into that etcd.
func TestEtcdMode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts servers")
	}
	e := etcdtest.Start(t)
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	bin := filepath.Join(t.TempDir(), "opemu")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/opemu/opemu")
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build: %s", out)
	url := startServer(t, bin, nil, "ENABLE_CONTROLLER=false", "STORE=etcd", "ETCD_ENDPOINTS="+e.Endpoint)

	var stdout, stderr bytes.Buffer
	err = run(context.Background(), []string{"-mode=etcd", "-target", url, "-etcd", e.Endpoint, "-rounds", "2", "-duration", "300ms", "-conns", "4", "-json"}, &stdout, &stderr)
	require.NoError(t, err, "stderr: %s", stderr.String())
	res := decode[etcdResult](t, stdout.Bytes())
	require.Len(t, res.Phases, 1)
	p := res.Phases[0]
	assert.Equal(t, "create", p.Phase)
	// The servers' CPU per operation, read from their /metrics: opemu's and etcd's in A,
	// etcd's in B (opemu's process_cpu_seconds_total moves in steps of 10 ms, so only etcd's
	// per-round figures and the medians are asserted).
	require.Len(t, res.ACPURuns, 2)
	require.Len(t, res.BCPURuns, 2)
	for _, r := range append(res.ACPURuns, res.BCPURuns...) {
		assert.Positive(t, r.Ops)
		assert.Positive(t, r.EtcdSeconds)
	}
	assert.Positive(t, res.CPU.AOpemuUsPerOp)
	assert.Positive(t, res.CPU.AEtcdUsPerOp)
	assert.Positive(t, res.CPU.BEtcdUsPerOp)
	assert.Positive(t, p.AOpsPerSec)
	assert.Positive(t, p.BOpsPerSec)
	assert.InDelta(t, p.AOpsPerSec/p.BOpsPerSec, p.Ratio, 0.01)
	assert.Zero(t, p.AErrors+p.BErrors)
	require.Len(t, res.BRuns, 2)
	// The raw puts stored what opemu stores, under their own keys.
	c := e.Client(t)
	resp, err := c.Get(context.Background(), "/loadfloor/", clientv3.WithPrefix(), clientv3.WithLimit(1))
	require.NoError(t, err)
	require.NotEmpty(t, resp.Kvs)
	var obj map[string]any
	require.NoError(t, json.Unmarshal(resp.Kvs[0].Value, &obj))
	assert.Equal(t, "Application", obj["kind"])
	assert.NotEmpty(t, obj["metadata"].(map[string]any)["uid"], "a stored object, stamped by opemu")
}

// TestKubeMode runs the kube mode briefly against two opemus over HTTPS with tokens, the one
// standing in for kube-apiserver (CI has none): every phase on both, each side's ratio to the
// first, the watch phase's deliveries all made; and a wrong token or an untrusted certificate
// stops the run before it measures anything.
func TestKubeMode(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts servers")
	}
	bins := buildServers(t)
	dirA, dirB := t.TempDir(), t.TempDir()
	start := func(dir, token string) string {
		return startServer(t, filepath.Join(bins, "opemu"), nil, "ENABLE_CONTROLLER=false", "TLS=self-signed", "TLS_DIR="+dir, "TOKEN="+token)
	}
	kubeURL, opemuURL := start(dirA, "token-a"), start(dirB, "token-b")
	cas := filepath.Join(dirA, "ca.crt") + "," + filepath.Join(dirB, "ca.crt")
	args := func(extra ...string) []string {
		return append([]string{"-mode=kube", "-kube", kubeURL, "-kube-token", "token-a", "-opemu", opemuURL,
			"-opemu-token", "token-b", "-cacert", cas, "-rounds", "2", "-conns", "2", "-watchers", "5",
			"-objects", "3", "-list-items", "20", "-json"}, extra...)
	}

	var out, errOut bytes.Buffer
	err := run(context.Background(), args("-duration", "150ms"), &out, &errOut)
	require.NoError(t, err, "stdout: %s\nstderr: %s", out.String(), errOut.String())
	res := decode[kubeResult](t, out.Bytes())
	require.Len(t, res.Runs, 2)
	for _, runs := range res.Runs {
		require.Len(t, runs, 2)
		assert.NotEqual(t, runs[0].Namespace, runs[1].Namespace)
	}
	var names []string
	for _, p := range res.Phases {
		names = append(names, p.Phase)
		require.Len(t, p.Sides, 2, p.Phase)
		assert.Equal(t, kubeURL, p.Sides[0].Target)
		assert.Equal(t, opemuURL, p.Sides[1].Target)
		assert.InDelta(t, 1.0, p.Sides[0].Ratio, 1e-9, p.Phase)
		for _, s := range p.Sides {
			assert.Positive(t, s.OpsPerSec, p.Phase)
			assert.LessOrEqual(t, s.OpsMin, s.OpsPerSec, p.Phase)
			assert.GreaterOrEqual(t, s.OpsMax, s.OpsPerSec, p.Phase)
			assert.Zero(t, s.Errors, p.Phase)
			assert.Positive(t, s.P99Ms, p.Phase)
		}
		// The ratio is the median of each round's ratio, within their range.
		var ratios []float64
		for r := range 2 {
			ratios = append(ratios, res.Runs[1][r].Phases[len(names)-1].OpsPerSec/res.Runs[0][r].Phases[len(names)-1].OpsPerSec)
		}
		assert.InDelta(t, median(ratios), p.Sides[1].Ratio, 0.001, p.Phase)
	}
	assert.Equal(t, strings.Split(kubePhases, ","), names)
	list, watch := res.Phases[len(names)-2], res.Phases[len(names)-1]
	for i := range 2 {
		assert.Equal(t, 20, list.Sides[i].Items, "every side lists the seeded namespace")
		assert.Equal(t, 5, watch.Sides[i].Items)
		for _, run := range res.Runs[i] {
			w := run.Phases[len(names)-1]
			assert.Positive(t, w.Writes)
			assert.Equal(t, 5*w.Writes, w.Ops, "every change reached every watcher")
		}
	}

	t.Run("start mode", func(t *testing.T) {
		// The CA must exist before the first start (the tool trusts it from the start): the
		// kube side's, which opemu reuses from its TLS_DIR.
		dir, addr := t.TempDir(), freeAddr(t)
		for _, f := range []string{"ca.crt", "ca.key"} {
			b, err := os.ReadFile(filepath.Join(dirA, f))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, f), b, 0o600))
		}
		var out, errOut bytes.Buffer
		err := run(context.Background(), []string{"-mode=start", "-target", "https://" + addr, "-token", "token-c",
			"-cacert", filepath.Join(dir, "ca.crt"), "-starts", "2", "-idle", "50ms", "-json", "--",
			"env", "TLS=self-signed", "TLS_DIR=" + dir, "TOKEN=token-c", "ENABLE_LEADER_ELECTION=false", "LOG_LEVEL=warn",
			"ADDR=" + addr, filepath.Join(bins, "opemu")}, &out, &errOut)
		require.NoError(t, err, "stderr: %s", errOut.String())
		res := decode[startResult](t, out.Bytes())
		require.Len(t, res.Runs, 2)
		for _, r := range res.Runs {
			assert.Positive(t, r.ReadyMs)
			if runtime.GOOS == "linux" {
				assert.Greater(t, r.IdleRSSMiB, 1.0)
				assert.Positive(t, r.IdleAnonMiB)
				assert.Less(t, r.IdleAnonMiB, r.IdleRSSMiB)
			}
		}
		assert.LessOrEqual(t, res.ReadyMinMs, res.ReadyMs)
		// The server was stopped: its port is free again.
		l, err := net.Listen("tcp", addr)
		require.NoError(t, err, "the started server still listens")
		require.NoError(t, l.Close())

		err = run(context.Background(), []string{"-mode=start", "-target", "http://" + freeAddr(t), "-starts", "1", "--", "false"}, io.Discard, io.Discard)
		require.ErrorContains(t, err, "exited before /readyz answered 200")
	})

	t.Run("rejects", func(t *testing.T) {
		tests := []struct {
			name string
			args []string
		}{
			{name: "wrong token", args: args("-kube-token", "token-b", "-n", "5")},
			{name: "untrusted certificate", args: args("-cacert", filepath.Join(dirA, "ca.crt"), "-n", "5")},
			{name: "no opemu", args: []string{"-mode=kube", "-kube", kubeURL}},
			{name: "patch without create", args: args("-phases", "patch-json")},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				var out bytes.Buffer
				require.Error(t, run(context.Background(), tc.args, &out, io.Discard))
				assert.Empty(t, out.String())
			})
		}
	})
}
