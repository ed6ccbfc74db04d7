// Package process builds Go programs (the opemu binary, an example operator) and runs them as OS
// processes for opemu's tests of tools that need a running cluster, outside any one test (a
// TestMain's environment) or inside one.
//
// Concurrency: a Process may be read from any goroutine; Stop is called once, by its owner.
package process

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Build runs `go build -o out pkg` (with the race detector when race is set, and without the
// DWARF tables only debuggers read, which take half a race build's link time).
func Build(out, pkg string, race bool) error {
	args := []string{"build", "-o", out}
	if race {
		args = append(args, "-race", "-ldflags=-w")
	}
	args = append(args, pkg)
	if b, err := exec.Command("go", args...).CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, b)
	}
	return nil
}

// Process is a started program; its standard error is kept for Logs.
type Process struct {
	cmd    *exec.Cmd
	mu     sync.Mutex // guards log
	log    bytes.Buffer
	exited chan struct{} // closed when the process has exited and log is complete
}

// Start runs bin with args and env (added to this process's environment) until Stop.
func Start(bin string, args, env []string) (*Process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stdout = cmd.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, exited: make(chan struct{})}
	go func() {
		defer close(p.exited)
		sc := bufio.NewScanner(pipe)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.log.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		_ = cmd.Wait()
	}()
	return p, nil
}

// Logs returns what the process has written to its standard error so far.
func (p *Process) Logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

// Exited is closed once the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// WaitLog waits up to timeout for a line of the log to match re and returns its submatches.
func (p *Process) WaitLog(re *regexp.Regexp, timeout time.Duration) ([]string, error) {
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(p.Logs()); m != nil {
			return m, nil
		}
		select {
		case <-p.exited:
			return nil, fmt.Errorf("%s exited before logging %q:\n%s", p.cmd.Path, re, p.Logs())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%s logged no %q within %v:\n%s", p.cmd.Path, re, timeout, p.Logs())
		}
	}
}

// Stop sends SIGTERM and waits up to 10 s for the process to exit (then kills it, and says so).
// A race the race detector reported in the process is an error too.
func (p *Process) Stop() error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	var err error
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
		err = fmt.Errorf("%s did not stop within 10s of SIGTERM", p.cmd.Path)
	}
	if i := strings.Index(p.Logs(), "WARNING: DATA RACE"); i >= 0 {
		err = errors.Join(err, fmt.Errorf("the race detector reported a race in %s:\n%s", p.cmd.Path, p.Logs()[i:]))
	}
	return err
}

var listeningRE = regexp.MustCompile(`listening addr=(\S+)`)

// Opemu is a started opemu binary.
type Opemu struct {
	*Process
	// Addr is where it listens (host:port, plain HTTP).
	Addr string
}

// StartOpemu runs the opemu binary bin on a free loopback port with env, and waits for its
// `listening addr=...` log line.
func StartOpemu(bin string, env ...string) (*Opemu, error) {
	p, err := Start(bin, nil, append([]string{"ADDR=127.0.0.1:0", "LOG_LEVEL=info"}, env...))
	if err != nil {
		return nil, err
	}
	m, err := p.WaitLog(listeningRE, 10*time.Second)
	if err != nil {
		return nil, errors.Join(err, p.Stop())
	}
	return &Opemu{Process: p, Addr: m[1]}, nil
}

// Kubeconfig is what `opemu kubeconfig --server http://<addr>` prints for o (bin is its binary).
func (o *Opemu) Kubeconfig(bin string) ([]byte, error) {
	cmd := exec.Command(bin, "kubeconfig", "--server", "http://"+o.Addr)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("opemu kubeconfig: %v: %s", err, stderr.String())
	}
	return out, nil
}

// StartOpemuT is StartOpemu for one test: it fails t when opemu does not start, and stops it
// when t ends (failing t if it does not stop or the race detector reported a race in it).
func StartOpemuT(t testing.TB, bin string, env ...string) *Opemu {
	t.Helper()
	o, err := StartOpemu(bin, env...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := o.Stop(); err != nil {
			t.Error(err)
		}
	})
	return o
}
