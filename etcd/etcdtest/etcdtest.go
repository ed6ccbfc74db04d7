// Package etcdtest starts a real etcd for tests: the etcd binary (Debian's etcd-server, or
// $OPEMU_TEST_ETCD), one member on free loopback ports with a data directory of its own, stopped
// when the test ends. Without an etcd binary a test fails when the environment variable CI is
// set (CI installs etcd-server) and is skipped otherwise.
//
// With $OPEMU_TEST_KINE set to a kine binary (k3s' etcd shim), the tests run against kine over
// SQLite instead (kine is not a dependency: build it apart, see the README).
package etcdtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Binary returns the etcd binary tests use: $OPEMU_TEST_KINE, $OPEMU_TEST_ETCD, else etcd on
// PATH, else "".
func Binary() string {
	if b := os.Getenv("OPEMU_TEST_KINE"); b != "" {
		return b
	}
	if b := os.Getenv("OPEMU_TEST_ETCD"); b != "" {
		return b
	}
	if b, err := exec.LookPath("etcd"); err == nil {
		return b
	}
	return ""
}

// Require returns the etcd binary, or ends the test: a failure when CI is set, a skip
// otherwise.
func Require(t testing.TB) string {
	t.Helper()
	b := Binary()
	if b == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("etcd is required: install Debian's etcd-server (.ci/run does) or set OPEMU_TEST_ETCD")
		}
		t.Skip("no etcd binary (install etcd-server, or set OPEMU_TEST_ETCD)")
	}
	return b
}

// Server is one etcd member started by a test.
type Server struct {
	// Endpoint is the client URL, http://127.0.0.1:<port>.
	Endpoint string
	// DataDir is the member's data directory, kept across Kill and Restart.
	DataDir string

	binary     string
	clientPort int
	peerPort   int
	tls        *TLS
	// name and cluster are the member's name and --initial-cluster ("test" and itself alone
	// unless StartCluster made it).
	name, cluster string

	mu     sync.Mutex // guards cmd, out, exited
	cmd    *exec.Cmd
	out    *bytes.Buffer
	exited chan struct{} // closed when cmd has exited
}

// TLS makes an etcd serve its clients over TLS and require their certificates.
type TLS struct {
	// CAFile verifies client certificates; CertFile and KeyFile are etcd's serving certificate.
	CAFile, CertFile, KeyFile string
	// Client is what a client of this etcd presents and trusts.
	Client *tls.Config
}

// StartTLS is Start with clients served over TLS (https://127.0.0.1:<port>).
func StartTLS(t testing.TB, cfg TLS) *Server {
	t.Helper()
	if os.Getenv("OPEMU_TEST_KINE") != "" {
		t.Skip("etcdtest starts kine without TLS")
	}
	return start(t, &cfg)
}

// Start starts a one-member etcd and waits until it answers; it is killed when the test ends.
// The data directory is in /dev/shm when there is one (fsync costs nothing there).
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, nil)
}

func start(t testing.TB, tlsCfg *TLS) *Server {
	t.Helper()
	bin := Require(t)
	base := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, "opemu-etcd-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	s := &Server{binary: bin, DataDir: filepath.Join(dir, "data"), tls: tlsCfg}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	var lastErr error
	for attempt := 0; attempt < 5; attempt++ {
		s.clientPort, s.peerPort = freePort(t), freePort(t)
		s.Endpoint = fmt.Sprintf("%s://127.0.0.1:%d", scheme, s.clientPort)
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(func() { s.Kill(t) })
			return s
		}
		s.Kill(t)
		os.RemoveAll(s.DataDir)
	}
	t.Fatalf("etcd did not start: %v", lastErr)
	return nil
}

func freePort(t testing.TB) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// StartCluster starts an etcd cluster of n members (plain HTTP) and waits until each answers;
// they are killed when the test ends. Kill and Restart act on one member.
func StartCluster(t testing.TB, n int) []*Server {
	t.Helper()
	if os.Getenv("OPEMU_TEST_KINE") != "" {
		t.Skip("kine is not an etcd cluster")
	}
	bin := Require(t)
	base := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		base = "/dev/shm"
	}
	dir, err := os.MkdirTemp(base, "opemu-etcd-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	members := make([]*Server, n)
	var peers []string
	for i := range members {
		s := &Server{binary: bin, DataDir: filepath.Join(dir, fmt.Sprintf("m%d", i)), name: fmt.Sprintf("m%d", i),
			clientPort: freePort(t), peerPort: freePort(t)}
		s.Endpoint = fmt.Sprintf("http://127.0.0.1:%d", s.clientPort)
		peers = append(peers, fmt.Sprintf("%s=http://127.0.0.1:%d", s.name, s.peerPort))
		members[i] = s
	}
	for _, s := range members {
		s.cluster = strings.Join(peers, ",")
		t.Cleanup(func() { s.Kill(t) })
		if err := s.launch(); err != nil {
			t.Fatalf("etcd member %s did not start: %v", s.name, err)
		}
	}
	for _, s := range members {
		if err := s.wait(); err != nil {
			t.Fatalf("etcd member %s: %v", s.name, err)
		}
	}
	return members
}

// start execs etcd and waits up to 10 s for it to answer.
func (s *Server) start() error {
	if err := s.launch(); err != nil {
		return err
	}
	return s.wait()
}

// launch execs etcd.
func (s *Server) launch() error {
	peer := fmt.Sprintf("http://127.0.0.1:%d", s.peerPort)
	// A lone member elects itself at once; members of a cluster on a loaded 2-core machine need
	// margins so that a busy moment is not taken for a lost leader.
	name, cluster, heartbeat, election := s.name, s.cluster, "100", "1000"
	if name == "" {
		name, cluster, heartbeat, election = "test", "test="+peer, "20", "200"
	}
	cmd := exec.Command(s.binary,
		"--name", name, "--data-dir", s.DataDir,
		"--listen-client-urls", s.Endpoint, "--advertise-client-urls", s.Endpoint,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", cluster,
		"--heartbeat-interval", heartbeat, "--election-timeout", election,
		"--logger", "zap", "--log-level", "error")
	if s.tls != nil {
		cmd.Args = append(cmd.Args, "--cert-file", s.tls.CertFile, "--key-file", s.tls.KeyFile,
			"--client-cert-auth", "--trusted-ca-file", s.tls.CAFile)
	}
	if os.Getenv("OPEMU_TEST_KINE") != "" {
		if err := os.MkdirAll(s.DataDir, 0o700); err != nil {
			return err
		}
		cmd = exec.Command(s.binary, "--listen-address", fmt.Sprintf("127.0.0.1:%d", s.clientPort),
			"--endpoint", "sqlite://"+filepath.Join(s.DataDir, "state.db")+"?_journal=WAL&cache=shared",
			"--metrics-bind-address", "0")
	}
	out := &bytes.Buffer{}
	cmd.Stdout, cmd.Stderr = lockedWriter{&s.mu, out}, lockedWriter{&s.mu, out}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.mu.Lock()
	s.cmd, s.out, s.exited = cmd, out, exited
	s.mu.Unlock()
	return nil
}

// wait waits up to 10 s for the launched etcd to answer a read.
func (s *Server) wait() error {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	c, err := s.newClient()
	if err != nil {
		return err
	}
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("etcd exited: %s", s.Output())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		_, err = c.Get(ctx, "health")
		cancel()
		if err == nil {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("etcd did not answer within 10 s: %v; output: %s", err, s.Output())
}

// Output is what etcd printed.
func (s *Server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.out == nil {
		return ""
	}
	return s.out.String()
}

// Kill stops etcd at once (SIGKILL) and waits for it to exit. It is idempotent.
func (s *Server) Kill(t testing.TB) {
	t.Helper()
	s.mu.Lock()
	cmd := s.cmd
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil || cmd.Process == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if err := cmd.Process.Signal(syscall.Signal(0)); err != nil {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Errorf("etcd did not exit after SIGKILL")
}

// Restart starts etcd again on the same ports and data directory (after Kill).
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.start(); err != nil {
		t.Fatalf("etcd did not restart: %v", err)
	}
}

// Client returns a client of this etcd, closed when the test ends.
func (s *Server) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	c, err := s.newClient()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// newClient is a client that does not wait for a connection and logs nothing (as
// etcd.NewClient; this package cannot import etcd, whose own tests use it).
func (s *Server) newClient() (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: []string{s.Endpoint}, Logger: zap.NewNop(), MaxCallSendMsgSize: 16 << 20}
	if s.tls != nil {
		cfg.TLS = s.tls.Client
	}
	return clientv3.New(cfg)
}
