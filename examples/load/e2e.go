package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// e2eResult is the e2e mode: Applications created against a server whose controller is on
// (with ROLLOUT_STEP=0), and the time until each is first seen with the condition Ready=True
// on the SSE stream. Latencies run from the moment a create was sent.
type e2eResult struct {
	Mode         string  `json:"mode"`
	Target       string  `json:"target"`
	Namespace    string  `json:"namespace"`
	N            int     `json:"n"`
	Conns        int     `json:"conns"`
	Rate         float64 `json:"rate,omitempty"`
	Created      int     `json:"created"`
	CreateErrors int     `json:"createErrors"`
	Ready        int     `json:"ready"`
	// CreatesPerSec is Created over the time the creates took.
	CreatesPerSec float64 `json:"createsPerSec"`
	// Seconds runs from the first create sent to the last Ready seen; ReadyPerSec is Ready over it.
	Seconds     float64 `json:"seconds"`
	ReadyPerSec float64 `json:"readyPerSec"`
	latencySummary
	// Events counts the stream's frames, of every kind of change.
	Events      int     `json:"events"`
	TimedOut    bool    `json:"timedOut"`
	LoadCPU     float64 `json:"loadCPU"`
	StreamError string  `json:"streamError,omitempty"`
	FirstError  string  `json:"firstError,omitempty"`
}

// runE2E opens the SSE stream of a fresh namespace first, then creates o.n Applications named
// e2e-<i> from o.conns workers (paced at o.rate creates/s when set), and waits up to o.timeout
// from the first create until each created one has been seen Ready.
func runE2E(ctx context.Context, o options) (*e2eResult, error) {
	ns := o.namespaceFor("", 1)
	res := &e2eResult{Mode: "e2e", Target: o.target, Namespace: ns, N: o.n, Conns: o.conns, Rate: o.rate}
	c := newClient(o.conns, 30*time.Second)
	defer closeClient(c)
	if _, err := do(ctx, c, http.MethodGet, o.target+"/healthz", "", nil, false); err != nil {
		return nil, fmt.Errorf("target %s: %w", o.target, err)
	}
	if err := createNamespace(ctx, c, o.target, ns); err != nil {
		return nil, fmt.Errorf("target %s: %w", o.target, err)
	}
	sc := newClient(1, 0)
	defer closeClient(sc)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	body, rd, err := openSSE(sctx, sc, sseURL(o.target, ns), true)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	w := &readyWatch{ready: map[string]time.Duration{}, progress: make(chan struct{}, 1)}
	watched := make(chan struct{})
	cpu := startCPU()
	base := time.Now()
	go func() {
		defer close(watched)
		w.run(rd, base)
	}()

	sent, created, errs, firstErr := createApps(ctx, c, o, ns, base)
	createsDone := time.Since(base)
	res.Created, res.CreateErrors, res.FirstError = created, errs, firstErr
	res.CreatesPerSec = rate(created, createsDone)

	timeout := time.NewTimer(max(o.timeout-createsDone, 0))
	defer timeout.Stop()
wait:
	for w.count.Load() < int64(created) {
		select {
		case <-w.progress:
		case <-watched:
			break wait
		case <-timeout.C:
			res.TimedOut = true
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	res.StreamError = stopStream(cancel, body, watched, func() error { return w.err })
	res.LoadCPU = cpu.cores()
	res.Events = w.events

	var lat []time.Duration
	var first, last time.Duration = -1, 0
	for name, at := range w.ready {
		i, ok := strings.CutPrefix(name, "e2e-")
		n, err := strconv.Atoi(i)
		if !ok || err != nil || n < 0 || n >= len(sent) || sent[n] < 0 {
			continue
		}
		lat = append(lat, at-sent[n])
		last = max(last, at)
	}
	for _, s := range sent {
		if s >= 0 && (first < 0 || s < first) {
			first = s
		}
	}
	res.Ready = len(lat)
	res.latencySummary = summarize(lat)
	if first >= 0 && res.Ready > 0 {
		res.Seconds = round3((last - first).Seconds())
		res.ReadyPerSec = rate(res.Ready, last-first)
	}
	return res, ctx.Err()
}

// createApps creates o.n Applications e2e-<i> in ns and returns, per index, when its create was
// sent (as time since base; -1 when it failed or was never sent), how many were created, and the failures.
func createApps(ctx context.Context, c *http.Client, o options, ns string, base time.Time) (sent []time.Duration, created, errs int, firstErr string) {
	url := appsURL(o.target, ns)
	sent = make([]time.Duration, o.n)
	for i := range sent {
		sent[i] = -1
	}
	type stats struct {
		errs     int
		firstErr string
	}
	st := make([]stats, o.conns)
	var next atomic.Int64
	var wg sync.WaitGroup
	for wk := range o.conns {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < o.n && ctx.Err() == nil; i = int(next.Add(1) - 1) {
				if o.rate > 0 && !sleepUntil(ctx, base.Add(time.Duration(float64(i)/o.rate*float64(time.Second)))) {
					return
				}
				name := "e2e-" + strconv.Itoa(i)
				t := time.Since(base)
				if _, err := do(ctx, c, http.MethodPost, url, "application/json", appBody(name, ns, 3), false); err == nil {
					sent[i] = t
				} else {
					if st[wk].errs == 0 {
						st[wk].firstErr = err.Error()
					}
					st[wk].errs++
				}
			}
		})
	}
	wg.Wait()
	for _, s := range st {
		errs += s.errs
		if firstErr == "" {
			firstErr = s.firstErr
		}
	}
	for _, s := range sent {
		if s >= 0 {
			created++
		}
	}
	return sent, created, errs, firstErr
}

// sleepUntil waits until t; false when ctx ended first.
func sleepUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return true
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// readyWatch follows one SSE stream and notes when each object is first seen Ready=True.
// ready, events and err belong to the goroutine running run until it returns; count and
// progress may be read meanwhile.
type readyWatch struct {
	ready    map[string]time.Duration // name -> first seen Ready, as time since base
	events   int
	err      error
	count    atomic.Int64
	progress chan struct{} // gets a token (never blocking) whenever count grows
}

var readyMarker = []byte(`"Ready"`)

// run reads frames until the stream ends or fails. Frames without the word "Ready" are not
// parsed, so the reader keeps up with the server.
func (w *readyWatch) run(rd *sseReader, base time.Time) {
	var ev watchEvent
	w.events, w.err = readFrames(rd, base, func(f sseFrame, at time.Duration) error {
		if !bytes.Contains(f.Data, readyMarker) {
			return nil
		}
		if err := ev.decode(f); err != nil {
			return err
		}
		if _, seen := w.ready[ev.Object.Metadata.Name]; seen || ev.Type == "DELETED" || !ev.ready() {
			return nil
		}
		w.ready[ev.Object.Metadata.Name] = at
		w.count.Add(1)
		notify(w.progress)
		return nil
	})
}

func (res *e2eResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "target %s  namespace %s  conns %d  rate %s\n", res.Target, res.Namespace, res.Conns, f0(res.Rate))
	table(w, [][]string{
		{"created", "errors", "ready", "creates/s", "ready/s", "seconds", "p50 ms", "p99 ms", "max ms", "events", "loadCPU"},
		{strconv.Itoa(res.Created), strconv.Itoa(res.CreateErrors), strconv.Itoa(res.Ready), f0(res.CreatesPerSec),
			f0(res.ReadyPerSec), f2(res.Seconds), f2(res.P50Ms), f2(res.P99Ms), f2(res.MaxMs), strconv.Itoa(res.Events), f2(res.LoadCPU)},
	})
	if res.FirstError != "" {
		fmt.Fprintf(w, "first create error: %s\n", res.FirstError)
	}
	if res.StreamError != "" {
		fmt.Fprintf(w, "stream error: %s\n", res.StreamError)
	}
}

func (res *e2eResult) failure() error {
	switch {
	case res.CreateErrors > 0:
		return fmt.Errorf("%d creates failed; first: %s", res.CreateErrors, res.FirstError)
	case res.StreamError != "":
		return fmt.Errorf("stream: %s", res.StreamError)
	case res.Ready < res.N:
		return fmt.Errorf("%d of %d Applications Ready (timed out: %v)", res.Ready, res.N, res.TimedOut)
	}
	return nil
}
