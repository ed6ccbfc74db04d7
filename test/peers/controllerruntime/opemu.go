package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// goCmd is `go args...` in dir. Cancelling ctx kills its whole process group (go test's test
// binary included), and Wait returns at most 10 s later.
func goCmd(ctx context.Context, dir string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// copySource downloads the controller-runtime module opemu's go.mod requires and copies it
// into scratch, writable, returning the copy's path and the version.
func copySource(ctx context.Context, repo, scratch string) (string, string, error) {
	cmd := goCmd(ctx, repo, "mod", "download", "-json", "sigs.k8s.io/controller-runtime")
	cmd.Stdout = nil
	b, err := cmd.Output()
	if err != nil {
		return "", "", fmt.Errorf("go mod download sigs.k8s.io/controller-runtime: %w", err)
	}
	var mod struct{ Version, Dir, Error string }
	if err := json.Unmarshal(b, &mod); err != nil {
		return "", "", err
	}
	if mod.Error != "" {
		return "", "", errors.New(mod.Error)
	}
	dst := filepath.Join(scratch, "controller-runtime@"+mod.Version)
	if err := os.CopyFS(dst, os.DirFS(mod.Dir)); err != nil {
		return "", "", fmt.Errorf("copying %s: %w", mod.Dir, err)
	}
	return dst, mod.Version, nil
}

// server is a running opemu and the kubeconfig that reaches it.
type server struct {
	cmd        *exec.Cmd
	exited     chan struct{} // closed once the process has exited and its log is written
	kubeconfig string
	url, token string
	ca         string // path of the CA certificate that verifies it
}

var listeningRE = regexp.MustCompile(`listening addr=(\S+)`)

// startOpemu starts bin as envtest's kube-apiserver would run: HTTPS with a CA of its own in
// dir, a token, no controllers and no nodes; its log goes to logPath. The caller stops it.
func startOpemu(ctx context.Context, bin, dir, logPath string) (*server, error) {
	raw := make([]byte, 16)
	rand.Read(raw)
	token := hex.EncodeToString(raw)
	env := append(os.Environ(), "ADDR=127.0.0.1:0", "LOG_LEVEL=info", "TLS=self-signed",
		"TLS_DIR="+filepath.Join(dir, "tls"), "TOKEN="+token,
		"ENABLE_CONTROLLER=false", "NODES=0", "ENABLE_LEADER_ELECTION=false")
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin)
	cmd.Env = env
	pipe, err := cmd.StderrPipe()
	if err != nil {
		log.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	s := &server{cmd: cmd, exited: make(chan struct{}), token: token, ca: filepath.Join(dir, "tls", "ca.crt")}
	first := make(chan string, 1)
	go func() {
		defer close(s.exited)
		defer log.Close()
		r := bufio.NewReader(pipe)
		line, _ := r.ReadString('\n')
		first <- line
		log.WriteString(line)
		io.Copy(log, r)
		cmd.Wait()
	}()
	var line string
	select {
	case line = <-first:
	case <-time.After(20 * time.Second):
		s.stop()
		return nil, errors.New("opemu logged nothing within 20s")
	}
	m := listeningRE.FindStringSubmatch(line)
	if m == nil {
		s.stop()
		return nil, fmt.Errorf("opemu's first log line is not `listening addr=...`: %q", line)
	}
	s.url = "https://" + m[1]
	kc := exec.CommandContext(ctx, bin, "kubeconfig", "--server", s.url)
	kc.Env = env
	b, err := kc.Output()
	if err != nil {
		s.stop()
		return nil, fmt.Errorf("opemu kubeconfig: %w", err)
	}
	s.kubeconfig = filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(s.kubeconfig, b, 0o600); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// alive reports whether the server is still running.
func (s *server) alive() bool {
	select {
	case <-s.exited:
		return false
	default:
		return true
	}
}

// stop ends the server (SIGTERM, then SIGKILL after 10 s) and waits until it has exited.
func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.exited
	}
}

// requests is how many API requests the server has answered (the sum of its
// apiserver_request_total), the proof that a suite talked to it.
func (s *server) requests() (float64, error) {
	pem, err := os.ReadFile(s.ca)
	if err != nil {
		return 0, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	c := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	req, err := http.NewRequest(http.MethodGet, s.url+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Authorization", "Bearer "+s.token)
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("GET /metrics: %s", resp.Status)
	}
	var total float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			return 0, fmt.Errorf("metrics line %q: %w", line, err)
		}
		total += v
	}
	return total, sc.Err()
}
