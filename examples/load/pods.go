package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// podsResult is the pods mode: kwok's benchmark through the API, as issue 29 asks it. -n Pods
// of -deployments Deployments are created in a fresh namespace against a server with its
// controllers on (and enough Nodes: NODES=100 holds 10,000), and the time until every Pod is
// first seen Running and Ready on one watch of the namespace's Pods is measured; the server's
// RSS is read once they have been idle -idle; then the Deployments are deleted (background
// cascade: the garbage collector takes the ReplicaSets, then the Pods, which their kubelets
// remove) and the time until every Pod's DELETED is seen is measured.
type podsResult struct {
	Mode        string `json:"mode"`
	Target      string `json:"target"`
	Namespace   string `json:"namespace"`
	N           int    `json:"n"`
	Deployments int    `json:"deployments"`
	Conns       int    `json:"conns"`
	// NodePods is how many Pods the schedulable Nodes hold (their allocatable pods).
	NodePods     int `json:"nodePods"`
	CreateErrors int `json:"createErrors"`
	// CreatedSeconds runs from the first Deployment's create to the last Pod's ADDED.
	CreatedSeconds float64 `json:"createdSeconds"`
	// Running counts the Pods seen Running and Ready; RunningSeconds runs from the first
	// Deployment's create to the last of them, RunningPerSec is Running over it.
	Running        int     `json:"running"`
	RunningSeconds float64 `json:"runningSeconds"`
	RunningPerSec  float64 `json:"runningPerSec"`
	// Deleted counts the Pods whose DELETED was seen; DeleteSeconds runs from the first
	// Deployment's delete to the last of them.
	DeleteErrors  int     `json:"deleteErrors"`
	Deleted       int     `json:"deleted"`
	DeleteSeconds float64 `json:"deleteSeconds"`
	DeletedPerSec float64 `json:"deletedPerSec"`
	// The server's RSS (process_resident_memory_bytes) before the creates, with every Pod
	// Running after -idle, and after the deletes; ServerCPU* is the CPU it used in each phase.
	RSSBeforeMiB      float64 `json:"rssBeforeMiB"`
	RSSIdleMiB        float64 `json:"rssIdleMiB"`
	RSSAfterMiB       float64 `json:"rssAfterMiB"`
	ServerCPURunning  float64 `json:"serverCPURunningSeconds"`
	ServerCPUDeleting float64 `json:"serverCPUDeletingSeconds"`
	// Events counts the watch's frames.
	Events      int     `json:"events"`
	TimedOut    string  `json:"timedOut,omitempty"`
	LoadCPU     float64 `json:"loadCPU"`
	StreamError string  `json:"streamError,omitempty"`
	FirstError  string  `json:"firstError,omitempty"`
}

// runPods runs the pods mode; each phase waits at most o.timeout.
func runPods(ctx context.Context, o options) (*podsResult, error) {
	ns := o.namespaceFor("", 1)
	res := &podsResult{Mode: "pods", Target: o.target, Namespace: ns, N: o.n, Deployments: o.deployments, Conns: o.conns}
	c := newClient(o.conns, 30*time.Second)
	defer closeClient(c)
	var err error
	if res.NodePods, err = nodePods(ctx, c, o.target); err != nil {
		return nil, fmt.Errorf("target %s: %w", o.target, err)
	}
	if res.NodePods < o.n {
		return nil, fmt.Errorf("target %s: its schedulable Nodes hold %d Pods, fewer than %d: start it with more (NODES=%d holds %d)",
			o.target, res.NodePods, o.n, o.n/110+2, (o.n/110+1)*110)
	}
	if err := createNamespace(ctx, c, o.target, ns); err != nil {
		return nil, fmt.Errorf("target %s: %w", o.target, err)
	}
	rss := func() float64 {
		v, err := metricValue(ctx, nil, o.target+"/metrics", "process_resident_memory_bytes")
		if err != nil {
			return -1
		}
		return round3(v / (1 << 20))
	}
	cpu := func() float64 {
		v, _ := processCPUSeconds(ctx, nil, o.target+"/metrics")
		return v
	}
	res.RSSBeforeMiB = rss()

	sc := newClient(1, 0)
	defer closeClient(sc)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	u := o.target + "/watch?" + url.Values{"kind": {"pods"}, "namespace": {ns}}.Encode()
	body, rd, err := openSSE(sctx, sc, u, true)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	w := &podWatch{running: map[string]struct{}{}, deleted: map[string]struct{}{}, progress: make(chan struct{}, 1)}
	watched := make(chan struct{})
	load := startCPU()
	base := time.Now()
	go func() {
		defer close(watched)
		w.run(rd, base)
	}()
	// wait waits until count reaches n, the stream ends, or o.timeout passes.
	wait := func(count *atomic.Int64, n int, phase string) {
		timeout := time.NewTimer(o.timeout)
		defer timeout.Stop()
		for count.Load() < int64(n) {
			select {
			case <-w.progress:
			case <-watched:
				return
			case <-timeout.C:
				res.TimedOut = phase
				return
			case <-ctx.Done():
				return
			}
		}
	}

	perDeployment := func(i int) int { return o.n/o.deployments + btoi(i < o.n%o.deployments) }
	cpu0 := cpu()
	res.CreateErrors, res.FirstError = eachDeployment(ctx, c, o, func(i int) (string, string, []byte) {
		return http.MethodPost, deploymentsURL(o.target, ns), deploymentBody(ns, i, perDeployment(i))
	})
	if res.CreateErrors == 0 {
		wait(&w.runningCount, o.n, "running")
	}
	res.ServerCPURunning = round3(cpu() - cpu0)
	if res.CreateErrors == 0 && res.TimedOut == "" && ctx.Err() == nil {
		if sleepUntil(ctx, time.Now().Add(o.idle)) {
			res.RSSIdleMiB = rss()
		}
		cpu0 = cpu()
		w.deleteStart.Store(int64(time.Since(base)))
		res.DeleteErrors, res.FirstError = eachDeployment(ctx, c, o, func(i int) (string, string, []byte) {
			return http.MethodDelete, deploymentsURL(o.target, ns) + "/" + deploymentName(i) + "?propagationPolicy=Background", nil
		})
		if res.DeleteErrors == 0 {
			wait(&w.deletedCount, o.n, "deleted")
		}
		res.ServerCPUDeleting = round3(cpu() - cpu0)
		res.RSSAfterMiB = rss()
	}
	res.StreamError = stopStream(cancel, body, watched, func() error { return w.err })
	res.LoadCPU = load.cores()
	res.Events = w.events
	res.Running, res.Deleted = len(w.running), len(w.deleted)
	res.CreatedSeconds = round3(w.lastAdded.Seconds())
	if res.Running > 0 {
		res.RunningSeconds = round3(w.lastRunning.Seconds())
		res.RunningPerSec = rate(res.Running, w.lastRunning)
	}
	if res.Deleted > 0 {
		d := w.lastDeleted - time.Duration(w.deleteStart.Load())
		res.DeleteSeconds = round3(d.Seconds())
		res.DeletedPerSec = rate(res.Deleted, d)
	}
	if res.TimedOut == "" && res.CreateErrors+res.DeleteErrors == 0 && ctx.Err() == nil {
		_, _ = do(ctx, c, http.MethodDelete, o.target+"/api/v1/namespaces/"+ns, "", nil, false)
	}
	return res, ctx.Err()
}

// eachDeployment sends one request per Deployment (what req says for index i) from o.conns
// workers, and returns how many failed and the first failure.
func eachDeployment(ctx context.Context, c *http.Client, o options, req func(i int) (method, url string, body []byte)) (errs int, firstErr string) {
	var next atomic.Int64
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(o.conns, o.deployments) {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < o.deployments && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				method, u, body := req(i)
				if _, err := do(ctx, c, method, u, "application/json", body, false); err != nil {
					mu.Lock()
					if errs == 0 {
						firstErr = err.Error()
					}
					errs++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	return errs, firstErr
}

func deploymentsURL(target, ns string) string {
	return target + "/apis/apps/v1/namespaces/" + ns + "/deployments"
}

func deploymentName(i int) string { return "bench-" + strconv.Itoa(i) }

// deploymentBody is Deployment bench-<i> with replicas Pods of one container.
func deploymentBody(ns string, i, replicas int) []byte {
	name := deploymentName(i)
	return fmt.Appendf(nil, `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":%q,"namespace":%q},"spec":{"replicas":%d,`+
		`"selector":{"matchLabels":{"app":%q}},"template":{"metadata":{"labels":{"app":%q}},"spec":{"containers":[{"name":"c","image":"nginx:1.27"}]}}}}`,
		name, ns, replicas, name, name)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// nodePods sums the allocatable pods of the Nodes a Pod without tolerations can be scheduled
// on: not cordoned, no NoSchedule or NoExecute taint.
func nodePods(ctx context.Context, c *http.Client, target string) (int, error) {
	body, err := do(ctx, c, http.MethodGet, target+"/api/v1/nodes", "", nil, true)
	if err != nil {
		return 0, err
	}
	var l struct {
		Items []struct {
			Spec struct {
				Unschedulable bool `json:"unschedulable"`
				Taints        []struct {
					Effect string `json:"effect"`
				} `json:"taints"`
			} `json:"spec"`
			Status struct {
				Allocatable struct {
					Pods string `json:"pods"`
				} `json:"allocatable"`
			} `json:"status"`
		} `json:"items"`
	}
	if err := json.Unmarshal(body, &l); err != nil {
		return 0, fmt.Errorf("decode the Nodes: %w", err)
	}
	total := 0
nodes:
	for _, n := range l.Items {
		if n.Spec.Unschedulable {
			continue
		}
		for _, t := range n.Spec.Taints {
			if t.Effect == "NoSchedule" || t.Effect == "NoExecute" {
				continue nodes
			}
		}
		p, _ := strconv.Atoi(n.Status.Allocatable.Pods)
		total += p
	}
	return total, nil
}

// podWatch follows the watch of a namespace's Pods: when each is first seen Running and Ready,
// and when each is deleted. running, deleted, the last times, events and err belong to the
// goroutine running run until it returns; the counts, deleteStart and progress may be used
// meanwhile.
type podWatch struct {
	running, deleted                    map[string]struct{}
	lastAdded, lastRunning, lastDeleted time.Duration // since base
	events                              int
	err                                 error
	runningCount, deletedCount          atomic.Int64
	deleteStart                         atomic.Int64  // since base, in nanoseconds
	progress                            chan struct{} // gets a token (never blocking) whenever a count grows
}

var (
	runningMarker = []byte(`"Running"`)
	addedMarker   = []byte(`{"type":"ADDED"`)
	deletedMarker = []byte(`{"type":"DELETED"`)
)

// run reads frames until the stream ends or fails. Only frames saying Running or DELETED are
// parsed, so the reader keeps up with the server.
func (w *podWatch) run(rd *sseReader, base time.Time) {
	var ev watchEvent
	w.events, w.err = readFrames(rd, base, func(f sseFrame, at time.Duration) error {
		if bytes.HasPrefix(f.Data, addedMarker) {
			w.lastAdded = at
		}
		del := bytes.HasPrefix(f.Data, deletedMarker)
		if !del && !bytes.Contains(f.Data, runningMarker) {
			return nil
		}
		if err := ev.decode(f); err != nil {
			return err
		}
		name := ev.Object.Metadata.Name
		switch _, running := w.running[name]; {
		case del:
			if _, seen := w.deleted[name]; !seen {
				w.deleted[name] = struct{}{}
				w.lastDeleted = at
				w.deletedCount.Add(1)
				notify(w.progress)
			}
		case !running && ev.Object.Status.Phase == "Running" && ev.ready():
			w.running[name] = struct{}{}
			w.lastRunning = at
			w.runningCount.Add(1)
			notify(w.progress)
		}
		return nil
	})
}

func (res *podsResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "target %s  namespace %s  %d Pods of %d Deployments  Nodes hold %d  conns %d\n",
		res.Target, res.Namespace, res.N, res.Deployments, res.NodePods, res.Conns)
	table(w, [][]string{
		{"phase", "pods", "errors", "seconds", "pods/s", "server CPU s", "RSS MiB after"},
		{"running", strconv.Itoa(res.Running), strconv.Itoa(res.CreateErrors), f2(res.RunningSeconds), f0(res.RunningPerSec), f2(res.ServerCPURunning), f2(res.RSSIdleMiB)},
		{"deleted", strconv.Itoa(res.Deleted), strconv.Itoa(res.DeleteErrors), f2(res.DeleteSeconds), f0(res.DeletedPerSec), f2(res.ServerCPUDeleting), f2(res.RSSAfterMiB)},
	})
	fmt.Fprintf(w, "last Pod created at %s s  RSS before %s MiB  events %d  loadCPU %s\n", f2(res.CreatedSeconds), f2(res.RSSBeforeMiB), res.Events, f2(res.LoadCPU))
	if res.FirstError != "" {
		fmt.Fprintf(w, "first error: %s\n", res.FirstError)
	}
	if res.StreamError != "" {
		fmt.Fprintf(w, "stream error: %s\n", res.StreamError)
	}
}

func (res *podsResult) failure() error {
	switch {
	case res.CreateErrors+res.DeleteErrors > 0:
		return fmt.Errorf("%d creates and %d deletes failed; first: %s", res.CreateErrors, res.DeleteErrors, res.FirstError)
	case res.StreamError != "":
		return fmt.Errorf("stream: %s", res.StreamError)
	case res.Running < res.N || res.Deleted < res.N:
		return fmt.Errorf("%d of %d Pods Running and Ready, %d deleted (timed out: %q)", res.Running, res.N, res.Deleted, res.TimedOut)
	}
	return nil
}
