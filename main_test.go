package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	opemu "github.com/opemu/opemu/app"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// binary is the opemu binary built once by TestMain for the process tests.
var binary string

func TestMain(m *testing.M) {
	if b := os.Getenv("OPEMU_TEST_BINARY"); b != "" {
		// A child run (see TestClientGoInformer) reuses the parent's binary.
		binary = b
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "opemu-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "opemu")
	out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building opemu: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func envFrom(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) {
		v, ok := m[k]
		return v, ok
	}
}

func TestParseConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		check func(t *testing.T, c config)
		err   string
	}{
		{name: "defaults", check: func(t *testing.T, c config) {
			assert.Equal(t, "127.0.0.1:3000", c.Addr)
			assert.Equal(t, "memory", c.LeaseBackend)
			assert.True(t, c.EnableLeaderElection)
			assert.True(t, c.EnableController)
			assert.Equal(t, 15*time.Second, c.LeaseDuration)
			assert.Equal(t, 10000, c.WatchHistory)
			assert.Equal(t, time.Second, c.JobDuration)
			assert.Equal(t, int64(3<<20), c.MaxBody)
			assert.Equal(t, 400, c.MaxInflight)
			assert.Equal(t, 5000, c.MaxWatches)
			assert.Equal(t, int64(128<<20), c.WatchHistoryBytes)
			assert.Equal(t, []string{"docker.io", "gcr.io"}, c.AllowedRegistries)
			assert.Equal(t, []string{"ubuntu", "debian", "alpine"}, c.BlockedImages)
			assert.NotEmpty(t, c.PodName)
			assert.Equal(t, filepath.Join(os.TempDir(), "opemu-default-elide-operator-leader.lease"), c.LeaseFile)
		}},
		{name: "env sets PORT", env: map[string]string{"PORT": "8080"}, check: func(t *testing.T, c config) {
			assert.Equal(t, "127.0.0.1:8080", c.Addr)
		}},
		{name: "flag wins over env", args: []string{"--port", "9090"}, env: map[string]string{"PORT": "8080"}, check: func(t *testing.T, c config) {
			assert.Equal(t, "127.0.0.1:9090", c.Addr)
		}},
		{name: "ADDR overrides PORT", env: map[string]string{"PORT": "8080", "ADDR": ":0"}, check: func(t *testing.T, c config) {
			assert.Equal(t, ":0", c.Addr)
		}},
		{name: "POD_NAME selects the file backend", env: map[string]string{"POD_NAME": "operator-1"}, check: func(t *testing.T, c config) {
			assert.Equal(t, "operator-1", c.PodName)
			assert.Equal(t, "file", c.LeaseBackend)
		}},
		{name: "empty registries mean any", env: map[string]string{"ALLOWED_REGISTRIES": "", "BLOCKED_IMAGES": ""}, check: func(t *testing.T, c config) {
			assert.Empty(t, c.AllowedRegistries)
			assert.Empty(t, c.BlockedImages)
		}},
		{name: "body size in MiB", env: map[string]string{"MAX_BODY": "512KiB"}, check: func(t *testing.T, c config) {
			assert.Equal(t, int64(512<<10), c.MaxBody)
		}},
		{name: "sizes and durations", env: map[string]string{"MAX_BODY": "1Mi", "ROLLOUT_STEP": "0", "RETRY_PERIOD": "500ms", "JOB_DURATION": "250ms"}, check: func(t *testing.T, c config) {
			assert.Equal(t, int64(1<<20), c.MaxBody)
			assert.Zero(t, c.RolloutStep)
			assert.Equal(t, 250*time.Millisecond, c.JobDuration)
			assert.Equal(t, 500*time.Millisecond, c.RetryPeriod)
		}},
		{name: "security defaults", check: func(t *testing.T, c config) {
			assert.Empty(t, c.AllowedHosts)
			assert.Empty(t, c.AllowedOrigins)
			assert.Empty(t, c.Token)
			assert.Empty(t, c.TLSMode)
			assert.False(t, c.InsecureNoAuth)
			assert.True(t, strings.HasSuffix(c.TLSDir, filepath.Join("opemu", "tls")) || strings.HasSuffix(c.TLSDir, "opemu-tls"), c.TLSDir)
		}},
		{name: "security settings", env: map[string]string{
			"ALLOWED_HOSTS": "opemu.test, .lab.example", "ALLOWED_ORIGINS": "http://localhost:5173,https://app.example",
			"TOKEN": "t0k3n", "TOKEN_FILE": "/etc/opemu/tokens.csv", "TLS": "self-signed", "TLS_DIR": "/tmp/x", "TLS_SANS": "opemu.lab,10.0.0.7",
		}, check: func(t *testing.T, c config) {
			assert.Equal(t, []string{"opemu.test", ".lab.example"}, c.AllowedHosts)
			assert.Equal(t, []string{"http://localhost:5173", "https://app.example"}, c.AllowedOrigins)
			assert.Equal(t, "t0k3n", c.Token)
			assert.Equal(t, "/etc/opemu/tokens.csv", c.TokenFile)
			assert.Equal(t, "self-signed", c.TLSMode)
			assert.Equal(t, "/tmp/x", c.TLSDir)
			assert.Equal(t, []string{"opemu.lab", "10.0.0.7"}, c.TLSSANs)
		}},
		{name: "security flags", args: []string{"--insecure-no-auth", "--tls-cert-file", "c.pem", "--tls-key-file", "k.pem"}, check: func(t *testing.T, c config) {
			assert.True(t, c.InsecureNoAuth)
			assert.Equal(t, "c.pem", c.TLSCertFile)
			assert.Equal(t, "k.pem", c.TLSKeyFile)
		}},
		{name: "manual clock", env: map[string]string{"CLOCK": "manual"}, check: func(t *testing.T, c config) {
			manual, ok := c.Clock.(interface{ Step(time.Duration) })
			require.True(t, ok, "a clock moved by hand")
			at := c.Clock.Now()
			manual.Step(30 * time.Second)
			assert.Equal(t, at.Add(30*time.Second), c.Clock.Now())
		}},
		{name: "real clock", args: []string{"--clock", "real"}, check: func(t *testing.T, c config) {
			assert.Nil(t, c.Clock)
		}},
		{name: "bad clock", env: map[string]string{"CLOCK": "fake"}, err: "invalid CLOCK"},
		{name: "bad allowed host", env: map[string]string{"ALLOWED_HOSTS": "http://opemu.test"}, err: "invalid ALLOWED_HOSTS"},
		{name: "bad allowed origin", env: map[string]string{"ALLOWED_ORIGINS": "localhost:5173"}, err: "invalid ALLOWED_ORIGINS"},
		{name: "origin with a path", env: map[string]string{"ALLOWED_ORIGINS": "http://localhost:5173/app"}, err: "invalid ALLOWED_ORIGINS"},
		{name: "token with a space", env: map[string]string{"TOKEN": "a b"}, err: "invalid TOKEN"},
		{name: "bad TLS", env: map[string]string{"TLS": "yes"}, err: "invalid TLS"},
		{name: "cert without key", env: map[string]string{"TLS_CERT_FILE": "c.pem"}, err: "invalid TLS_CERT_FILE"},
		{name: "self-signed and cert files", env: map[string]string{"TLS": "self-signed", "TLS_CERT_FILE": "c.pem", "TLS_KEY_FILE": "k.pem"}, err: "invalid TLS"},
		{name: "SANs without self-signed", env: map[string]string{"TLS_SANS": "opemu.lab"}, err: "invalid TLS_SANS"},
		{name: "bad SAN", env: map[string]string{"TLS": "self-signed", "TLS_SANS": "not a name"}, err: "invalid TLS_SANS"},
		{name: "insecure with a token", env: map[string]string{"INSECURE_NO_AUTH": "true", "TOKEN": "t"}, err: "invalid INSECURE_NO_AUTH"},
		{name: "bad port", env: map[string]string{"PORT": "http"}, err: "invalid PORT"},
		{name: "bad duration", env: map[string]string{"LEASE_DURATION": "15"}, err: "invalid LEASE_DURATION"},
		{name: "zero lease duration", env: map[string]string{"LEASE_DURATION": "0s"}, err: "invalid LEASE_DURATION"},
		{name: "bad bool", args: []string{"--enable-controller=maybe"}, err: "invalid ENABLE_CONTROLLER"},
		{name: "bad workers", env: map[string]string{"WORKER_COUNT": "0"}, err: "invalid WORKER_COUNT"},
		{name: "bad backend", env: map[string]string{"LEASE_BACKEND": "etcd"}, err: "invalid LEASE_BACKEND"},
		{name: "bad body size", env: map[string]string{"MAX_BODY": "lots"}, err: "invalid MAX_BODY"},
		{name: "history size", env: map[string]string{"WATCH_HISTORY_BYTES": "64MiB", "MAX_WATCHES": "10"}, check: func(t *testing.T, c config) {
			assert.Equal(t, int64(64<<20), c.WatchHistoryBytes)
			assert.Equal(t, 10, c.MaxWatches)
		}},
		{name: "bad history size", env: map[string]string{"WATCH_HISTORY_BYTES": "0"}, err: "invalid WATCH_HISTORY_BYTES"},
		{name: "bad watch limit", args: []string{"--max-watches", "0"}, err: "invalid MAX_WATCHES"},
		{name: "bad log level", env: map[string]string{"LOG_LEVEL": "loud"}, err: "invalid LOG_LEVEL"},
		{name: "renew deadline not below lease", env: map[string]string{"RENEW_DEADLINE": "20s"}, err: "invalid RENEW_DEADLINE"},
		{name: "unknown flag", args: []string{"--nope"}, err: "flag provided but not defined"},
		{name: "stray argument", args: []string{"serve"}, err: "unexpected argument"},
		{name: "store defaults", check: func(t *testing.T, c config) {
			assert.Equal(t, "memory", c.Store)
			assert.Equal(t, []string{"http://127.0.0.1:2379"}, c.EtcdEndpoints)
			assert.Equal(t, "/opemu", c.EtcdPrefix)
			assert.Equal(t, 5*time.Minute, c.EtcdCompactionInterval)
		}},
		{name: "bad store", env: map[string]string{"STORE": "redis"}, err: "invalid STORE"},
		{name: "bad etcd endpoint", env: map[string]string{"ETCD_ENDPOINTS": "127.0.0.1:2379"}, err: "invalid ETCD_ENDPOINTS"},
		{name: "bad etcd prefix", env: map[string]string{"ETCD_PREFIX": "opemu/"}, err: "invalid ETCD_PREFIX"},
		{name: "store backend without etcd", env: map[string]string{"LEASE_BACKEND": "store"}, err: "invalid LEASE_BACKEND"},
		{name: "etcd cert without key", env: map[string]string{"ETCD_CERT_FILE": "c.pem"}, err: "invalid ETCD_CERT_FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c, err := parseConfig(tt.args, envFrom(tt.env), io.Discard)
			if tt.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tt.err)
				return
			}
			require.NoError(t, err)
			tt.check(t, c)
		})
	}
}

// TestParseConfigEtcd: STORE=etcd takes the etcd settings and the store lease backend in a
// binary built with -tags etcd, and is refused, naming the build line, in the default one.
func TestParseConfigEtcd(t *testing.T) {
	t.Parallel()
	env := map[string]string{"STORE": "etcd", "ETCD_ENDPOINTS": "http://10.0.0.1:2379, https://10.0.0.2:2379", "ETCD_PREFIX": "/demo", "ETCD_COMPACTION_INTERVAL": "0", "POD_NAME": "r1"}
	c, err := parseConfig(nil, envFrom(env), io.Discard)
	if !opemu.EtcdBuiltIn() {
		require.Error(t, err)
		assert.Contains(t, err.Error(), "go build -tags etcd")
		return
	}
	require.NoError(t, err)
	assert.Equal(t, "etcd", c.Store)
	assert.Equal(t, []string{"http://10.0.0.1:2379", "https://10.0.0.2:2379"}, c.EtcdEndpoints)
	assert.Equal(t, "/demo", c.EtcdPrefix)
	assert.Zero(t, c.EtcdCompactionInterval)
	assert.Equal(t, "store", c.LeaseBackend, "the shared Lease, even with POD_NAME set")
}

func TestHelpListsEverySetting(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	_, err := parseConfig([]string{"--help"}, envFrom(nil), &out)
	require.ErrorIs(t, err, flag.ErrHelp)
	for _, s := range settings() {
		assert.Contains(t, out.String(), "$"+s.env, "help should list %s", s.env)
		assert.Contains(t, out.String(), "-"+s.flag)
	}
}

// proc is a started opemu binary.
type proc struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex // guards stderr, written while the process runs
	// stderr is what the process logged; read it with logs.
	stderr *bytes.Buffer
	done   chan error
}

// logs returns what the process has logged so far.
func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

var listeningRE = regexp.MustCompile(`listening addr=(\S+)`)

// start runs the binary with env on a free port and waits for its first log line.
func start(t *testing.T, env ...string) *proc {
	t.Helper()
	return startBinary(t, binary, env...)
}

// startBinary is start with another build of opemu (etcdBinary).
func startBinary(t *testing.T, bin string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), append([]string{"ADDR=127.0.0.1:0", "LOG_LEVEL=info"}, env...)...)
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, stderr: &bytes.Buffer{}, done: make(chan error, 1)}
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			select {
			case first <- line:
			default:
			}
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
		}
		p.done <- cmd.Wait()
	}()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	select {
	case line := <-first:
		m := listeningRE.FindStringSubmatch(line)
		require.NotNil(t, m, "the first log line must be `listening addr=...`, got %q", line)
		p.addr = m[1]
	case <-time.After(10 * time.Second):
		t.Fatal("opemu printed nothing within 10s")
	}
	return p
}

func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("opemu did not exit within %v", timeout)
		return -1
	}
}

func TestBinaryServesAndStopsOnSIGTERM(t *testing.T) {
	t.Parallel()
	p := start(t)
	resp, err := http.Get("http://" + p.addr + "/healthz")
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.JSONEq(t, `{"status":"healthy"}`, string(body))

	// resource_count follows the store.
	create, err := http.Post("http://"+p.addr+"/apis/cloudnative.elide.dev/v1/namespaces/default/applications", "application/json",
		strings.NewReader(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"a"},"spec":{"replicas":1,"image":"nginx:1"}}`))
	require.NoError(t, err)
	create.Body.Close()
	require.Equal(t, http.StatusCreated, create.StatusCode)
	m, err := http.Get("http://" + p.addr + "/metrics")
	require.NoError(t, err)
	metricsBody, _ := io.ReadAll(m.Body)
	m.Body.Close()
	assert.Contains(t, string(metricsBody), `resource_count{kind="Application",namespace="default"} 1`)
	assert.Contains(t, string(metricsBody), `resource_count{kind="Namespace",namespace=""} 4`, "the system namespaces")
	assert.Contains(t, string(metricsBody), `resource_count{kind="Node",namespace=""} 1`, "NODES=1")

	// An open watch must not hold shutdown up.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+p.addr+"/watch", nil)
	watch, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer watch.Body.Close()

	start := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	assert.Equal(t, 0, p.wait(t, 5*time.Second), "exit code after SIGTERM; stderr:\n%s", p.logs())
	assert.Less(t, time.Since(start), 5*time.Second)
	_, err = io.ReadAll(watch.Body)
	assert.NoError(t, err, "the watch should end cleanly, not be cut")
}

func TestBinaryRejectsInvalidConfig(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, env, want string }{
		{"duration", "LEASE_DURATION=soon", "invalid LEASE_DURATION"},
		{"port", "PORT=-1", "invalid PORT"},
		{"log format", "LOG_FORMAT=xml", "invalid LOG_FORMAT"},
		{"allowed origin", "ALLOWED_ORIGINS=*", "invalid ALLOWED_ORIGINS"},
		{"TLS", "TLS=on", "invalid TLS"},
		{"missing token file", "TOKEN_FILE=/nonexistent/tokens.csv", "invalid TOKEN_FILE"},
		{"missing certificate", "TLS_CERT_FILE=/nonexistent/c.pem\x00TLS_KEY_FILE=/nonexistent/k.pem", "invalid TLS_CERT_FILE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd := exec.Command(binary)
			cmd.Env = append(os.Environ(), strings.Split(tt.env, "\x00")...)
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			require.True(t, errors.As(err, &exit), "want a non-zero exit, got %v", err)
			assert.Equal(t, 2, exit.ExitCode())
			assert.Contains(t, string(out), tt.want)
			assert.True(t, strings.HasPrefix(string(out), "opemu: "))
		})
	}
}

func httpJSON(t *testing.T, method, url, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp.StatusCode, m
}

const appJSON = `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"web"},"spec":{"replicas":2,"image":"nginx:1.27"}}`

func TestBinaryReconcilesApplications(t *testing.T) {
	t.Parallel()
	p := start(t, "ROLLOUT_STEP=0")
	api := "http://" + p.addr + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	code, _ := httpJSON(t, "POST", api, appJSON)
	require.Equal(t, http.StatusCreated, code)
	require.Eventually(t, func() bool {
		_, obj := httpJSON(t, "GET", api+"/web", "")
		st, _ := obj["status"].(map[string]any)
		return st["phase"] == "Running"
	}, 10*time.Second, 20*time.Millisecond)
	code, _ = httpJSON(t, "POST", api+"/web/reconcile", "")
	assert.Equal(t, http.StatusAccepted, code)
	_, h := httpJSON(t, "GET", api+"/web/history", "")
	assert.NotEmpty(t, h["items"])
	m, err := http.Get("http://" + p.addr + "/metrics")
	require.NoError(t, err)
	body, _ := io.ReadAll(m.Body)
	m.Body.Close()
	for _, want := range []string{
		`resource_phase_count{kind="Application",phase="Running"} 1`,
		`controller_reconcile_total{controller="application",result="success"}`,
		`workqueue_adds_total{name="application"}`,
		`event_total{severity="Info",type="Normal"}`,
	} {
		assert.Contains(t, string(body), want)
	}
}

func TestBinaryWithoutController(t *testing.T) {
	t.Parallel()
	p := start(t, "ENABLE_CONTROLLER=false", "ROLLOUT_STEP=0")
	api := "http://" + p.addr + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	code, _ := httpJSON(t, "POST", api, appJSON)
	require.Equal(t, http.StatusCreated, code)
	code, _ = httpJSON(t, "POST", api+"/web/reconcile", "")
	assert.Equal(t, http.StatusServiceUnavailable, code)
	// Give a controller, were there one, ample time; nothing may touch the object.
	deadline := time.Now().Add(300 * time.Millisecond)
	for time.Now().Before(deadline) {
		_, obj := httpJSON(t, "GET", api+"/web", "")
		require.Nil(t, obj["status"], "no controller writes status")
		require.Nil(t, obj["metadata"].(map[string]any)["finalizers"])
	}
}
