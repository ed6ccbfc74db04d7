package e2e

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"k8s.io/client-go/rest"

	"github.com/opemu/opemu/test/internal/kubectl"
)

// proc is a started opemu binary.
type proc struct {
	cmd  *exec.Cmd
	addr string
	mu   sync.Mutex // guards stderr, written while the process runs
	// stderr is what the process logged; read it with logs.
	stderr *bytes.Buffer
	exited chan struct{} // closed once the process has exited and stderr is complete
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

// startBinary is start with another build of opemu (shippedBinary). When the test
// ends the process is killed, and the test fails if the race detector reported a race in it.
func startBinary(t *testing.T, bin string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), append([]string{"ADDR=127.0.0.1:0", "LOG_LEVEL=info"}, env...)...)
	pipe, err := cmd.StderrPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	p := &proc{cmd: cmd, stderr: &bytes.Buffer{}, exited: make(chan struct{})}
	first := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pipe)
		for sc.Scan() {
			line := sc.Text()
			// The line is in logs before start returns on it.
			p.mu.Lock()
			p.stderr.WriteString(line + "\n")
			p.mu.Unlock()
			select {
			case first <- line:
			default:
			}
		}
		_ = cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("opemu (pid %d) did not exit within 10s of SIGKILL", cmd.Process.Pid)
			return
		}
		if i := strings.Index(p.logs(), "WARNING: DATA RACE"); i >= 0 {
			t.Errorf("the race detector reported a race in opemu:\n%s", p.logs()[i:])
		}
	})
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

// wait waits until the process exits, at most timeout, and returns its exit code.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.exited:
		return p.cmd.ProcessState.ExitCode()
	case <-time.After(timeout):
		t.Fatalf("opemu did not exit within %v", timeout)
		return -1
	}
}

// procStatus reads a field of /proc/<pid>/status of p in bytes (VmRSS: resident now; VmHWM: the
// peak resident size since the process started).
func procStatus(t *testing.T, p *proc, key string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^` + key + `:\s+(\d+) kB`).FindSubmatch(b)
	require.NotNil(t, m, "%s in /proc/<pid>/status", key)
	kb, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return kb << 10
}

var heapAllocRE = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`)

// liveHeap asks a process started with PPROF=true for its live heap after a GC: the heap
// profile with gc=1 collects first and ends with runtime.MemStats.
func liveHeap(t *testing.T, p *proc) int64 {
	t.Helper()
	resp, err := http.Get("http://" + p.addr + "/debug/pprof/heap?debug=1&gc=1")
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	m := heapAllocRE.FindSubmatch(b)
	require.NotNil(t, m, "HeapAlloc in the heap profile")
	n, _ := strconv.ParseInt(string(m[1]), 10, 64)
	return n
}

// freePort returns a loopback address that was free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	return ln.Addr().String()
}

// restConfig is client-go's configuration for p.
func restConfig(p *proc) *rest.Config {
	return &rest.Config{Host: "http://" + p.addr, QPS: 1000, Burst: 1000}
}

// kubeconfigFor runs `opemu kubeconfig` with env (and args) and returns its output.
func kubeconfigFor(t *testing.T, env []string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"kubeconfig"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "opemu kubeconfig: %s", stderr.String())
	return out
}

// newKube is kubectl pointed at p with the kubeconfig `opemu kubeconfig --server` prints.
func newKube(t *testing.T, p *proc) *kubectl.Kubectl {
	t.Helper()
	return kubectl.New(t, kubeconfigFor(t, nil, "--server", "http://"+p.addr))
}
