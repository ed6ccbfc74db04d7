package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The start mode measures a server's start and idle memory, the same way for opemu and
// kube-apiserver (issue 30): it execs the command after "--" -starts times, each time polling
// -target's /readyz (with -token, every millisecond) from the exec until it answers 200, then
// reads the process's resident memory from /proc at that moment and again after -idle, and
// stops it (SIGTERM, then SIGKILL after 10 s). The child inherits the tool's environment; use
// env(1) to give it more.

// startRun is one start.
type startRun struct {
	ReadyMs float64 `json:"readyMs"`
	// RSSMiB is VmRSS when /readyz first answered 200; IdleRSSMiB and IdleAnonMiB (RssAnon:
	// heap, stacks, not the binary's pages) after -idle. -1 where /proc is not readable.
	RSSMiB      float64 `json:"rssMiB"`
	IdleRSSMiB  float64 `json:"idleRSSMiB"`
	IdleAnonMiB float64 `json:"idleAnonMiB"`
}

// startResult is the start mode's result: medians and ranges over the starts.
type startResult struct {
	Mode        string     `json:"mode"`
	Command     string     `json:"command"`
	Target      string     `json:"target"`
	IdleSeconds float64    `json:"idleSeconds"`
	ReadyMs     float64    `json:"readyMs"`
	ReadyMinMs  float64    `json:"readyMinMs"`
	ReadyMaxMs  float64    `json:"readyMaxMs"`
	IdleRSSMiB  float64    `json:"idleRSSMiB"`
	IdleAnonMiB float64    `json:"idleAnonMiB"`
	Runs        []startRun `json:"runs"`
}

// runStart execs o.command o.starts times, one after another.
func runStart(ctx context.Context, o options) (*startResult, error) {
	roots, err := loadRoots(o.caFiles)
	if err != nil {
		return nil, fmt.Errorf("-cacert: %w", err)
	}
	res := &startResult{Mode: "start", Command: strings.Join(o.command, " "), Target: o.target, IdleSeconds: o.idle.Seconds()}
	for range o.starts {
		r, err := startOnce(ctx, o, roots)
		if err != nil {
			return nil, err
		}
		res.Runs = append(res.Runs, r)
	}
	var ready, rss, anon []float64
	for _, r := range res.Runs {
		ready, rss, anon = append(ready, r.ReadyMs), append(rss, r.IdleRSSMiB), append(anon, r.IdleAnonMiB)
	}
	res.ReadyMs, res.ReadyMinMs, res.ReadyMaxMs = round3(median(ready)), round3(minOf(ready)), round3(maxOf(ready))
	res.IdleRSSMiB, res.IdleAnonMiB = round3(median(rss)), round3(median(anon))
	return res, nil
}

// startOnce execs the command, waits for /readyz, reads its memory and stops it; the process
// is stopped and waited for on every path.
func startOnce(ctx context.Context, o options, roots *x509.CertPool) (startRun, error) {
	c := newTargetClient(1, time.Second, roots, o.token)
	defer closeClient(c)
	cmd := exec.Command(o.command[0], o.command[1:]...)
	var out bytes.Buffer // the child's output, for the error when it does not become ready
	cmd.Stdout, cmd.Stderr = &out, &out
	exited := make(chan struct{})
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return startRun{}, err
	}
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	defer stopProcess(cmd, exited)
	deadline := t0.Add(o.timeout)
	for {
		if status, _ := readyz(ctx, c, o.target); status == http.StatusOK {
			break
		}
		select {
		case <-exited:
			return startRun{}, fmt.Errorf("%s exited before /readyz answered 200: %s", o.command[0], tail(out.Bytes()))
		case <-ctx.Done():
			return startRun{}, ctx.Err()
		case <-time.After(time.Millisecond):
		}
		if time.Now().After(deadline) {
			return startRun{}, fmt.Errorf("%s: /readyz not 200 within %s", o.command[0], o.timeout)
		}
	}
	r := startRun{ReadyMs: ms(time.Since(t0))}
	pid := cmd.Process.Pid
	r.RSSMiB = procStatusMiB(pid, "VmRSS")
	select {
	case <-time.After(o.idle):
	case <-exited:
		return startRun{}, fmt.Errorf("%s exited while idle: %s", o.command[0], tail(out.Bytes()))
	case <-ctx.Done():
		return startRun{}, ctx.Err()
	}
	r.IdleRSSMiB, r.IdleAnonMiB = procStatusMiB(pid, "VmRSS"), procStatusMiB(pid, "RssAnon")
	return r, nil
}

// readyz answers /readyz's status code, 0 when there was no answer.
func readyz(ctx context.Context, c *http.Client, target string) (int, error) {
	_, err := do(ctx, c, http.MethodGet, target+"/readyz", "", nil, false)
	if se := (*statusError)(nil); errors.As(err, &se) {
		return se.code, nil
	}
	if err != nil {
		return 0, err
	}
	return http.StatusOK, nil
}

// stopProcess sends SIGTERM, then SIGKILL after 10 s, and waits until the process has exited.
func stopProcess(cmd *exec.Cmd, exited <-chan struct{}) {
	_ = cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
	}
}

// procStatusMiB reads a "<field>: <n> kB" line of /proc/<pid>/status in MiB; -1 if it cannot.
func procStatusMiB(pid int, field string) float64 {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), field+":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
		if err != nil {
			return -1
		}
		return round3(kb / 1024)
	}
	return -1
}

// tail is the end of a child's output, for an error message.
func tail(b []byte) string {
	return string(bytes.TrimSpace(b[max(len(b)-512, 0):]))
}

func (res *startResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "%s  (%s/readyz)  idle %ss\n", res.Command, res.Target, strconv.FormatFloat(res.IdleSeconds, 'f', -1, 64))
	rows := [][]string{{"start", "exec→200 ms", "RSS at 200 MiB", "idle RSS MiB", "idle anon MiB"}}
	for i, r := range res.Runs {
		rows = append(rows, []string{strconv.Itoa(i + 1), f2(r.ReadyMs), f2(r.RSSMiB), f2(r.IdleRSSMiB), f2(r.IdleAnonMiB)})
	}
	rows = append(rows, []string{"median", f2(res.ReadyMs), "", f2(res.IdleRSSMiB), f2(res.IdleAnonMiB)})
	table(w, rows)
	line, _ := json.Marshal(res)
	fmt.Fprintf(w, "%s\n", line)
}

func (res *startResult) failure() error { return nil }
