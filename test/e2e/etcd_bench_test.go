package e2e

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/opemu/opemu/etcd/etcdtest"
)

// execEtcdReplica starts opemu with STORE=etcd over e and returns it, its address and when it
// was started; the caller kills it.
func execEtcdReplica(b *testing.B, e *etcdtest.Server, env ...string) (*exec.Cmd, string, time.Time) {
	b.Helper()
	start := time.Now()
	cmd := exec.Command(binary)
	cmd.Env = append(os.Environ(), append([]string{"ADDR=127.0.0.1:0", "STORE=etcd", "ETCD_ENDPOINTS=" + e.Endpoint,
		"ETCD_PREFIX=/bench"}, env...)...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(pipe)
	if !sc.Scan() {
		b.Fatal("no log line")
	}
	m := listeningRE.FindStringSubmatch(sc.Text())
	if m == nil {
		b.Fatalf("first line %q", sc.Text())
	}
	go func() { _, _ = io.Copy(io.Discard, pipe) }()
	return cmd, m[1], start
}

// BenchmarkStartupEtcd measures exec of opemu with STORE=etcd, etcd running, to its
// first 200 on /readyz (SPEC §12: under 200 ms; /healthz answers 200 from the start, while the
// replica still waits for etcd), and the idle RSS right after.
func BenchmarkStartupEtcd(b *testing.B) {
	e := etcdtest.Start(b)
	client := &http.Client{Timeout: time.Second}
	var total, worst time.Duration
	var rssKiB float64
	n := 0
	for b.Loop() {
		cmd, addr, start := execEtcdReplica(b, e, "ENABLE_LEADER_ELECTION=false")
		for {
			resp, err := client.Get("http://" + addr + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Since(start) > 10*time.Second {
				b.Fatal("no 200 within 10s")
			}
			time.Sleep(200 * time.Microsecond)
		}
		d := time.Since(start)
		total, worst, n = total+d, max(worst, d), n+1
		rssKiB = readRSS(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	b.ReportMetric(float64(total.Microseconds())/1000/float64(n), "ms/start")
	b.ReportMetric(float64(worst.Microseconds())/1000, "ms/worst-start")
	b.ReportMetric(rssKiB/1024, "MiB-rss")
}

// BenchmarkEtcdFirstList measures, with OPEMU_BENCH_APPS Applications (default 1,000; SPEC §12's
// figure is for 100,000) stored in etcd, exec of a replica to the end of its first consistent
// list of every Application (SPEC §12: under 3 s for 100,000), and its RSS then.
func BenchmarkEtcdFirstList(b *testing.B) {
	count := 1000
	if v := os.Getenv("OPEMU_BENCH_APPS"); v != "" {
		var err error
		if count, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	e := etcdtest.Start(b)
	seedApps(b, e, count)
	client := &http.Client{Timeout: 30 * time.Second}
	var total, worst, serving time.Duration
	var rssKiB float64
	n := 0
	for b.Loop() {
		cmd, addr, start := execEtcdReplica(b, e, "ENABLE_CONTROLLER=false", "ENABLE_LEADER_ELECTION=false")
		for {
			resp, err := client.Get("http://" + addr + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Since(start) > time.Minute {
				b.Fatal("not serving within a minute")
			}
			time.Sleep(time.Millisecond)
		}
		serving += time.Since(start)
		var body []byte
		for {
			resp, err := client.Get("http://" + addr + "/apis/cloudnative.elide.dev/v1/applications")
			if err == nil {
				body, _ = io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Since(start) > time.Minute {
				b.Fatal("no list within a minute")
			}
			time.Sleep(time.Millisecond)
		}
		d := time.Since(start)
		if got := bytes.Count(body, []byte(`"kind":"Application"`)); got != count {
			b.Fatalf("listed %d of %d", got, count)
		}
		total, worst, n = total+d, max(worst, d), n+1
		rssKiB = readRSS(cmd.Process.Pid)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	b.ReportMetric(float64(count), "apps")
	b.ReportMetric(float64(serving.Microseconds())/1000/float64(n), "ms/serving")
	b.ReportMetric(float64(total.Microseconds())/1000/float64(n), "ms/first-list")
	b.ReportMetric(float64(worst.Microseconds())/1000, "ms/worst-first-list")
	b.ReportMetric(rssKiB/1024, "MiB-rss")
}

// seedApps stores count Applications in e the way a replica stores them: one is created
// through a replica, the rest are copies of its stored value under other names, put 100 to a
// transaction.
func seedApps(b *testing.B, e *etcdtest.Server, count int) {
	b.Helper()
	cmd, addr, _ := execEtcdReplica(b, e, "ENABLE_CONTROLLER=false", "ENABLE_LEADER_ELECTION=false")
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var created bool
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && !created; time.Sleep(10 * time.Millisecond) {
		// Its namespace first (a 409 once it exists), as on a cluster.
		if resp, err := http.Post("http://"+addr+"/api/v1/namespaces", "application/json",
			bytes.NewReader([]byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"bench"}}`))); err == nil {
			resp.Body.Close()
		}
		resp, err := http.Post("http://"+addr+"/apis/cloudnative.elide.dev/v1/namespaces/bench/applications", "application/json",
			bytes.NewReader([]byte(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"app-0"},"spec":{"replicas":3,"image":"nginx:1.27"}}`)))
		if err == nil {
			resp.Body.Close()
			created = resp.StatusCode == http.StatusCreated
		}
	}
	if !created {
		b.Fatal("could not create the template Application")
	}
	c := e.Client(b)
	ctx := context.Background()
	const keyPrefix = "/bench/cloudnative.elide.dev/applications/bench/"
	resp, err := c.Get(ctx, keyPrefix+"app-0")
	if err != nil || len(resp.Kvs) == 0 {
		b.Fatalf("reading the template: %v", err)
	}
	before, after, _ := bytes.Cut(resp.Kvs[0].Value, []byte(`"name":"app-0"`))
	var ops []clientv3.Op
	flush := func() {
		if len(ops) == 0 {
			return
		}
		if _, err := c.Txn(ctx).Then(ops...).Commit(); err != nil {
			b.Fatal(err)
		}
		ops = ops[:0]
	}
	for i := 1; i < count; i++ {
		name := "app-" + strconv.Itoa(i)
		v := append(append(append([]byte{}, before...), `"name":"`+name+`"`...), after...)
		ops = append(ops, clientv3.OpPut(keyPrefix+name, string(v)))
		if len(ops) == 100 {
			flush()
		}
	}
	flush()
}
