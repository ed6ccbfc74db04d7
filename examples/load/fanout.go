package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// fanoutResult is the fanout mode: Clients SSE streams on one namespace, plus one stalled
// client, while Changes merge patches are made at Rate per second.
//
// Delivery latency (P50Ms, P99Ms, MaxMs) runs from the moment the write's response arrived at
// the tool (t0: the write is committed and its resourceVersion known) to the moment a client
// read the frame with that id. A frame can overtake its own write response, so a latency can
// be slightly negative. P99FromSendMs runs from when the write was sent instead: an upper bound
// that includes the write itself.
type fanoutResult struct {
	Mode        string  `json:"mode"`
	Target      string  `json:"target"`
	Namespace   string  `json:"namespace"`
	Clients     int     `json:"clients"`
	Rate        float64 `json:"rate"`
	Seconds     float64 `json:"seconds"`
	Changes     int     `json:"changes"`
	WriteErrors int     `json:"writeErrors"`
	FirstError  string  `json:"firstError,omitempty"`
	// Expected is Changes written × Clients; Received counts the (client, change) pairs
	// delivered; Lost = Expected − Received.
	Expected        int64 `json:"expected"`
	Received        int64 `json:"received"`
	Lost            int64 `json:"lost"`
	Duplicates      int64 `json:"duplicates"`
	ClientsWithLoss int   `json:"clientsWithLoss"`
	// ClientsEnded counts streams that ended before the run did (an ERROR frame or EOF).
	ClientsEnded int `json:"clientsEnded"`
	// OtherEvents counts frames, over all clients, for changes the tool did not make (the
	// controller's status writes when it is on).
	OtherEvents int64 `json:"otherEvents"`
	latencySummary
	P99FromSendMs float64 `json:"p99FromSendMs"`
	// ConnectSeconds is how long all the clients took to connect; DrainSeconds is the time
	// from the last write's response until every client had received it.
	ConnectSeconds float64       `json:"connectSeconds"`
	DrainSeconds   float64       `json:"drainSeconds"`
	Stalled        stalledResult `json:"stalled"`
	LoadCPU        float64       `json:"loadCPU"`
}

// stalledResult is what became of the client that stopped reading after the retry frame.
type stalledResult struct {
	// Disconnected is true when, after the run, its connection had been closed by the server;
	// false when it was still open.
	Disconnected bool `json:"disconnected"`
	// ErrorFrame is true when the server sent it an ERROR frame (it fell behind) before closing.
	ErrorFrame bool `json:"errorFrame"`
	// Bytes is how much was waiting for it, read after the run.
	Bytes int64  `json:"bytes"`
	Err   string `json:"err,omitempty"`
}

// write is one change the tool made; start and done are times since the run's base.
type write struct {
	start, done time.Duration
	rv          uint64
	err         error
}

// runFanout pre-creates o.objects Applications in a fresh namespace, connects o.clients SSE
// clients and the stalled one, waits (up to o.timeout) until all are connected, then makes
// changes at o.rate for o.duration, waits up to o.drain for every client to receive the last
// one, and closes everything.
func runFanout(ctx context.Context, o options) (*fanoutResult, error) {
	ns := o.namespaceFor("", 1)
	res := &fanoutResult{Mode: "fanout", Target: o.target, Namespace: ns, Clients: o.clients, Rate: o.rate,
		Seconds: o.duration.Seconds()}
	wc := newClient(16, 30*time.Second)
	defer closeClient(wc)
	if err := createNamespace(ctx, wc, o.target, ns); err != nil {
		return nil, fmt.Errorf("target %s: %w", o.target, err)
	}
	for i := range o.objects {
		name := "fan-" + strconv.Itoa(i)
		if _, err := do(ctx, wc, http.MethodPost, appsURL(o.target, ns), "application/json", appBody(name, ns, 3), false); err != nil {
			return nil, fmt.Errorf("create %s: %w", name, err)
		}
	}

	cctx, cancel := context.WithCancel(ctx)
	base := time.Now()
	sc := newClient(o.clients, 0)
	defer closeClient(sc)
	clients := make([]*fanClient, o.clients)
	connected := make(chan error, o.clients)
	sem := make(chan struct{}, 64) // connects in flight
	var wg sync.WaitGroup
	defer wg.Wait() // after the cancel below, which ends every stream
	defer cancel()
	u := sseURL(o.target, ns)
	for i := range clients {
		fc := &fanClient{}
		fc.ids = make([]uint64, 0, int(o.rate*o.duration.Seconds()*2)+16)
		fc.at = make([]time.Duration, 0, cap(fc.ids))
		clients[i] = fc
		wg.Go(func() { fc.run(cctx, sc, u, base, sem, connected) })
	}
	stalled, err := dialStalled(cctx, o.target, ns)
	if err != nil {
		return nil, fmt.Errorf("stalled client: %w", err)
	}
	defer stalled.Close()
	if err := awaitConnected(ctx, connected, o.clients, o.timeout); err != nil {
		return nil, err
	}
	res.ConnectSeconds = round3(time.Since(base).Seconds())

	cpu := startCPU()
	writes := makeChanges(ctx, wc, o, ns, base)
	var lastRV uint64
	var lastDone time.Duration
	for _, w := range writes {
		if w.err != nil {
			if res.WriteErrors == 0 {
				res.FirstError = w.err.Error()
			}
			res.WriteErrors++
			continue
		}
		lastRV, lastDone = max(lastRV, w.rv), max(lastDone, w.done)
	}
	res.Changes = len(writes) - res.WriteErrors
	drained := awaitDelivered(ctx, clients, base, lastRV, o.drain)
	res.DrainSeconds = round3((drained - lastDone).Seconds())
	res.LoadCPU = cpu.cores()
	if o.stallWait > 0 {
		sleepUntil(ctx, time.Now().Add(o.stallWait))
	}
	res.Stalled = checkStalled(stalled)
	for _, fc := range clients {
		if fc.ended.Load() {
			res.ClientsEnded++
		}
	}
	cancel()
	wg.Wait()
	res.tally(clients, writes)
	return res, ctx.Err()
}

// makeChanges merge-patches spec.replicas of fan-<i mod objects> at o.rate for o.duration,
// each write in its own goroutine so a slow answer does not delay the next, and returns them
// once all have been answered. Consecutive values for one object differ, so each write is a
// change.
func makeChanges(ctx context.Context, c *http.Client, o options, ns string, base time.Time) []write {
	total := max(int(o.rate*o.duration.Seconds()), 1)
	writes := make([]write, total)
	interval := time.Duration(float64(time.Second) / o.rate)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range writes {
		if !sleepUntil(ctx, start.Add(time.Duration(i)*interval)) {
			writes = writes[:i]
			break
		}
		wg.Go(func() {
			w := &writes[i]
			name := "fan-" + strconv.Itoa(i%o.objects)
			body := []byte(`{"spec":{"replicas":` + strconv.Itoa(1+i/o.objects%10) + `}}`)
			w.start = time.Since(base)
			var resp []byte
			resp, w.err = do(ctx, c, http.MethodPatch, appsURL(o.target, ns)+"/"+name, "application/merge-patch+json", body, true)
			w.done = time.Since(base)
			if w.err == nil {
				w.rv, w.err = resourceVersionOf(resp)
			}
		})
	}
	wg.Wait()
	return writes
}

func resourceVersionOf(obj []byte) (uint64, error) {
	var o struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(obj, &o); err != nil {
		return 0, fmt.Errorf("decode write response: %w", err)
	}
	return strconv.ParseUint(o.Metadata.ResourceVersion, 10, 64)
}

// awaitConnected waits for n connect results, for at most timeout; the first failure is
// returned.
func awaitConnected(ctx context.Context, connected <-chan error, n int, timeout time.Duration) error {
	t := time.NewTimer(timeout)
	defer t.Stop()
	for got := 0; got < n; got++ {
		select {
		case err := <-connected:
			if err != nil {
				return fmt.Errorf("client %d of %d: %w", got+1, n, err)
			}
		case <-t.C:
			return fmt.Errorf("only %d of %d clients connected within %s", got, n, timeout)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// awaitDelivered polls until every client has received id rv or ended, for at most timeout,
// and returns the time (since the clients' base) when it stopped waiting. Frames arrive in
// resourceVersion order, so a client that has rv has had its chance at every earlier change.
func awaitDelivered(ctx context.Context, clients []*fanClient, base time.Time, rv uint64, timeout time.Duration) time.Duration {
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for {
		done := true
		for _, fc := range clients {
			if fc.lastID.Load() < rv && !fc.ended.Load() {
				done = false
				break
			}
		}
		if done || time.Now().After(deadline) {
			return time.Since(base)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return time.Since(base)
		}
	}
}

// tally compares what each client received with the writes.
func (res *fanoutResult) tally(clients []*fanClient, writes []write) {
	byRV := make(map[uint64]int, len(writes))
	for i, w := range writes {
		if w.err == nil {
			byRV[w.rv] = i
		}
	}
	res.Expected = int64(len(byRV)) * int64(len(clients))
	var lat, fromSend []time.Duration
	seen := make([]bool, len(writes))
	for _, fc := range clients {
		clear(seen)
		got := 0
		for k, id := range fc.ids {
			i, ok := byRV[id]
			switch {
			case !ok:
				res.OtherEvents++
				continue
			case seen[i]:
				res.Duplicates++
				continue
			}
			seen[i] = true
			got++
			lat = append(lat, fc.at[k]-writes[i].done)
			fromSend = append(fromSend, fc.at[k]-writes[i].start)
		}
		res.Received += int64(got)
		if got < len(byRV) {
			res.ClientsWithLoss++
		}
	}
	res.Lost = res.Expected - res.Received
	res.latencySummary = summarize(lat)
	slices.Sort(fromSend)
	if len(fromSend) > 0 {
		res.P99FromSendMs = ms(percentile(fromSend, 99))
	}
}

// fanClient is one SSE client. ids, at, err and errorFrame belong to its goroutine until run
// returns; lastID and ended may be read meanwhile.
type fanClient struct {
	ids        []uint64        // frame ids in arrival order
	at         []time.Duration // when each was read, since base
	err        error
	errorFrame bool
	lastID     atomic.Uint64
	ended      atomic.Bool // the stream ended or failed
}

// run connects (at most cap(sem) clients connect at once), reports the outcome on connected
// (buffered: never blocks), then records frames until the stream ends or ctx is done.
func (fc *fanClient) run(ctx context.Context, c *http.Client, u string, base time.Time, sem chan struct{}, connected chan<- error) {
	defer fc.ended.Store(true)
	var (
		body io.ReadCloser
		rd   *sseReader
	)
	if !fc.connect(ctx, sem, connected, func() (err error) {
		body, rd, err = openSSE(ctx, c, u, false)
		return err
	}) {
		return
	}
	defer body.Close()
	for {
		f, err := rd.next()
		if err != nil {
			fc.err = err
			return
		}
		at := time.Since(base)
		if f.Error {
			fc.errorFrame = true
			return
		}
		if f.HasID {
			fc.record(f.ID, at)
		}
	}
}

// connect opens a stream with open, at most cap(sem) at once, and reports the outcome on
// connected (buffered: never blocks). It returns whether the stream is open; when open failed,
// fc.err says why.
func (fc *fanClient) connect(ctx context.Context, sem chan struct{}, connected chan<- error, open func() error) bool {
	select {
	case sem <- struct{}{}:
	case <-ctx.Done():
		connected <- ctx.Err()
		return false
	}
	err := open()
	<-sem
	connected <- err
	fc.err = err
	return err == nil
}

// record notes a change with version id received at (since the run's base).
func (fc *fanClient) record(id uint64, at time.Duration) {
	fc.ids = append(fc.ids, id)
	fc.at = append(fc.at, at)
	fc.lastID.Store(id)
}

// dialStalled opens the stalled client: a raw connection that sends the watch request, reads
// the response up to the retry frame (so the server has registered its watcher), and then
// reads nothing until checkStalled. It keeps the kernel's default receive buffer: a small
// SO_RCVBUF on loopback (MSS 64 KiB) keeps the window shut even after the data is read, and
// checkStalled could not drain it. The caller closes it.
func dialStalled(ctx context.Context, target, ns string) (net.Conn, error) {
	tu, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	conn, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", tu.Host)
	if err != nil {
		return nil, err
	}
	path := sseURL("", ns)
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nAccept: text/event-stream\r\n\r\n", path, tu.Host); err != nil {
		conn.Close()
		return nil, err
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	var got []byte
	buf := make([]byte, 256)
	for !bytes.Contains(got, []byte("\nretry:")) {
		n, err := conn.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			conn.Close()
			return nil, fmt.Errorf("read the response: %w (got %q)", err, got)
		}
	}
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200")) {
		conn.Close()
		return nil, fmt.Errorf("unexpected response %q", got)
	}
	_ = conn.SetReadDeadline(time.Time{})
	return conn, nil
}

// checkStalled reads whatever waits for the stalled client: the server had closed the connection if the read ends
// in EOF or a reset, and still holds it open if the data stops and a second passes without
// more. It takes at most 10 s.
func checkStalled(conn net.Conn) stalledResult {
	var r stalledResult
	buf := make([]byte, 64<<10)
	end := time.Now().Add(10 * time.Second)
	var tail []byte // the end of the previous read, for a marker split across reads
	for time.Now().Before(end) {
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		n, err := conn.Read(buf)
		r.Bytes += int64(n)
		chunk := append(tail, buf[:n]...)
		r.ErrorFrame = r.ErrorFrame || bytes.Contains(chunk, errorPrefix)
		tail = append([]byte(nil), chunk[max(len(chunk)-len(errorPrefix), 0):]...)
		switch {
		case err == nil:
		case errors.Is(err, os.ErrDeadlineExceeded):
			return r
		case errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) || isReset(err):
			r.Disconnected = true
			return r
		default:
			r.Err = err.Error()
			return r
		}
	}
	r.Err = "still receiving after 10s"
	return r
}

// isReset reports a read that failed for a reason other than a timeout: on a connection the
// tool still holds open, the peer reset it.
func isReset(err error) bool {
	var op *net.OpError
	return errors.As(err, &op) && op.Op == "read" && !op.Timeout()
}

func (res *fanoutResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "target %s  namespace %s  clients %d (+1 stalled)  rate %s/s  for %ss  connect %.2fs  drain %.3fs\n",
		res.Target, res.Namespace, res.Clients, f0(res.Rate), f0(res.Seconds), res.ConnectSeconds, res.DrainSeconds)
	table(w, [][]string{
		{"changes", "errors", "expected", "received", "lost", "dup", "ended", "other", "p50 ms", "p99 ms", "max ms", "p99 send ms", "loadCPU"},
		{strconv.Itoa(res.Changes), strconv.Itoa(res.WriteErrors), strconv.FormatInt(res.Expected, 10),
			strconv.FormatInt(res.Received, 10), strconv.FormatInt(res.Lost, 10), strconv.FormatInt(res.Duplicates, 10),
			strconv.Itoa(res.ClientsEnded), strconv.FormatInt(res.OtherEvents, 10), f2(res.P50Ms), f2(res.P99Ms),
			f2(res.MaxMs), f2(res.P99FromSendMs), f2(res.LoadCPU)},
	})
	fmt.Fprintf(w, "latency: t0 = write response received (p99 send ms: t0 = write sent)\n")
	fmt.Fprintf(w, "stalled client: disconnected %v, error frame %v, %d bytes waiting", res.Stalled.Disconnected,
		res.Stalled.ErrorFrame, res.Stalled.Bytes)
	if res.Stalled.Err != "" {
		fmt.Fprintf(w, ", %s", res.Stalled.Err)
	}
	fmt.Fprintln(w)
	if res.FirstError != "" {
		fmt.Fprintf(w, "first write error: %s\n", res.FirstError)
	}
}

func (res *fanoutResult) failure() error {
	switch {
	case res.WriteErrors > 0:
		return fmt.Errorf("%d writes failed; first: %s", res.WriteErrors, res.FirstError)
	case res.Changes == 0:
		return errors.New("no change was made")
	case res.Lost > 0 || res.ClientsEnded > 0:
		return fmt.Errorf("%d of %d deliveries lost; %d clients missed changes, %d streams ended early",
			res.Lost, res.Expected, res.ClientsWithLoss, res.ClientsEnded)
	}
	return nil
}
