package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
)

// The kube mode's watch phase: o.watchers Kubernetes watches (?watch=true, one JSON event per
// line, as kube-apiserver and opemu both serve them) on a namespace of o.objects ConfigMaps,
// while o.conns workers merge-patch those ConfigMaps as fast as they are answered for
// o.duration. Its rate is deliveries (one change reaching one watcher) per second, from the
// first write until every watcher had the last change (or o.drain ran out); its latencies run
// from a write's response to each watcher reading the event, as the fanout mode's do. A change
// a watcher never received counts as an error.

// watch runs the watch phase in its own namespace, <round namespace>-watch.
func (r *kubeRun) watch(ctx context.Context) (phaseResult, error) {
	ns := r.ns + "-watch"
	if err := createNamespace(ctx, r.c, r.target, ns); err != nil {
		return phaseResult{}, err
	}
	objects := max(r.o.objects, 1)
	for i := range objects {
		name := "fan-" + strconv.Itoa(i)
		if _, err := do(ctx, r.c, http.MethodPost, cmURL(r.target, ns), "application/json", cmBody(name, ns, "created"), false); err != nil {
			return phaseResult{}, fmt.Errorf("create %s: %w", name, err)
		}
	}
	list, err := do(ctx, r.c, http.MethodGet, cmURL(r.target, ns), "", nil, true)
	if err != nil {
		return phaseResult{}, err
	}
	var l struct {
		Metadata struct{ ResourceVersion string }
	}
	if err := json.Unmarshal(list, &l); err != nil {
		return phaseResult{}, fmt.Errorf("the list of %s: %w", ns, err)
	}
	rv := l.Metadata.ResourceVersion

	cctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait() // after the cancel below, which ends every stream
	defer cancel()
	base := time.Now()
	clients := make([]*fanClient, r.o.watchers)
	connected := make(chan error, len(clients))
	sem := make(chan struct{}, 16) // connects in flight
	u := cmURL(r.target, ns) + "?watch=true&resourceVersion=" + url.QueryEscape(rv)
	for i := range clients {
		fc := &fanClient{}
		clients[i] = fc
		wg.Go(func() { fc.watchJSON(cctx, r.streams, u, base, sem, connected) })
	}
	if err := awaitConnected(ctx, connected, len(clients), r.o.timeout); err != nil {
		return phaseResult{}, err
	}

	serverBefore, serverOK := readServerCPU(ctx, r.c, r.target)
	cpu := startCPU()
	start := time.Since(base)
	writes := r.changes(ctx, ns, objects, base)
	var lastRV uint64
	pr := phaseResult{Phase: "watch", Writes: len(writes), Items: len(clients), ServerCPU: -1, ServerCPUPerOpUs: -1}
	for _, w := range writes {
		if w.err != nil {
			if pr.FirstError == "" {
				pr.FirstError = w.err.Error()
			}
			pr.Errors++
			continue
		}
		lastRV = max(lastRV, w.rv)
	}
	drained := awaitDelivered(ctx, clients, base, lastRV, r.o.drain)
	elapsed := drained - start
	pr.LoadCPU = cpu.cores()
	serverAfter, afterOK := readServerCPU(ctx, r.c, r.target)
	cancel()
	wg.Wait()

	var fr fanoutResult
	fr.tally(clients, writes)

	pr.Ops = int(fr.Received)
	pr.Errors += int(fr.Lost)
	if fr.Lost > 0 && pr.FirstError == "" {
		pr.FirstError = fmt.Sprintf("%d of %d deliveries lost (%d watchers missed changes)", fr.Lost, fr.Expected, fr.ClientsWithLoss)
	}
	pr.Seconds = round3(elapsed.Seconds())
	pr.OpsPerSec = rate(pr.Ops, elapsed)
	pr.latencySummary = fr.latencySummary
	if serverOK && afterOK && pr.Ops > 0 {
		used := (serverAfter - serverBefore).Seconds()
		pr.ServerCPU = round3(used / elapsed.Seconds())
		pr.ServerCPUPerOpUs = round3(used / float64(pr.Ops) * 1e6)
	}
	return pr, nil
}

// changes merge-patches fan-<k mod objects> from o.conns workers until o.duration has passed,
// each write a new value (its sequence number k; the ConfigMaps were created with another, so
// no write leaves its object unchanged), and returns the writes, times since base.
func (r *kubeRun) changes(ctx context.Context, ns string, objects int, base time.Time) []write {
	url := cmURL(r.target, ns) + "/fan-"
	per := make([][]write, r.o.conns)
	deadline := time.Now().Add(r.o.duration)
	var wg sync.WaitGroup
	for w := range r.o.conns {
		wg.Go(func() {
			for i := 0; ctx.Err() == nil && time.Now().Before(deadline); i++ {
				k := w + i*r.o.conns
				body := []byte(`{"data":{"k":"` + strconv.Itoa(k) + `"}}`)
				wr := write{start: time.Since(base)}
				resp, err := do(ctx, r.c, http.MethodPatch, url+strconv.Itoa(k%objects), "application/merge-patch+json", body, true)
				wr.done = time.Since(base)
				if wr.err = err; err == nil {
					var ok bool
					if wr.rv, ok = resourceVersionIn(resp); !ok {
						wr.err = errors.New("no resourceVersion in the patch's answer")
					}
				}
				per[w] = append(per[w], wr)
			}
		})
	}
	wg.Wait()
	var all []write
	for _, p := range per {
		all = append(all, p...)
	}
	return all
}

// watchJSON opens a Kubernetes watch (at most cap(sem) open at once), reports the outcome on
// connected (buffered: never blocks), then records each event's resourceVersion until the
// stream ends or ctx is done. An ERROR event ends it.
func (fc *fanClient) watchJSON(ctx context.Context, c *http.Client, u string, base time.Time, sem chan struct{}, connected chan<- error) {
	defer fc.ended.Store(true)
	var body io.ReadCloser
	if !fc.connect(ctx, sem, connected, func() (err error) {
		body, err = openWatch(ctx, c, u)
		return err
	}) {
		return
	}
	defer body.Close()
	rd := newWatchReader(body)
	for {
		ev, err := rd.next()
		if err != nil {
			fc.err = err
			return
		}
		if ev.Error {
			fc.errorFrame = true
			return
		}
		if ev.HasRV {
			fc.record(ev.RV, time.Since(base))
		}
	}
}

// openWatch sends a watch request and returns its body once the server has answered 200:
// kube-apiserver and opemu both answer after the watch is registered, and the request names
// the resourceVersion to start after, so no change after it is missed. The caller closes it.
func openWatch(ctx context.Context, c *http.Client, u string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, &statusError{http.MethodGet, u, resp.StatusCode, string(bytes.TrimSpace(b))}
	}
	return resp.Body, nil
}

// kubeEvent is what the watch phase reads of one event: its object's resourceVersion, and
// whether it is an ERROR event.
type kubeEvent struct {
	HasRV bool
	RV    uint64
	Error bool
}

// watchReader reads a Kubernetes JSON watch stream, one event per line, finding each event's
// resourceVersion without decoding the event (the first "resourceVersion" after "metadata").
// It is not safe for concurrent use.
type watchReader struct{ br *bufio.Reader }

func newWatchReader(r io.Reader) *watchReader {
	return &watchReader{br: bufio.NewReaderSize(r, 16<<10)}
}

var watchErrorPrefix = []byte(`{"type":"ERROR"`)

// next returns the next event. Blank lines are skipped; a line longer than the buffer is
// searched in its first 16 KiB. It returns the reader's error, io.EOF when the stream ends
// between events, or io.ErrUnexpectedEOF when it ends inside one.
func (w *watchReader) next() (kubeEvent, error) {
	for {
		line, err := w.br.ReadSlice('\n')
		long := errors.Is(err, bufio.ErrBufferFull)
		if err != nil && !long {
			if errors.Is(err, io.EOF) && len(bytes.TrimSpace(line)) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return kubeEvent{}, err
		}
		if len(bytes.TrimSpace(line)) == 0 && !long {
			continue
		}
		ev := kubeEvent{Error: bytes.HasPrefix(line, watchErrorPrefix)}
		ev.RV, ev.HasRV = resourceVersionIn(line)
		for long {
			_, err = w.br.ReadSlice('\n')
			if long = errors.Is(err, bufio.ErrBufferFull); err != nil && !long {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return kubeEvent{}, err
			}
		}
		return ev, nil
	}
}

var (
	metadataKey = []byte(`"metadata":{`)
	rvKey       = []byte(`"resourceVersion":"`)
)

// resourceVersionIn finds the first "resourceVersion" after the first "metadata" in b (an
// object or a watch event's JSON, not a list: its items may come first), as a number.
func resourceVersionIn(b []byte) (uint64, bool) {
	i := bytes.Index(b, metadataKey)
	if i < 0 {
		return 0, false
	}
	b = b[i:]
	j := bytes.Index(b, rvKey)
	if j < 0 {
		return 0, false
	}
	b = b[j+len(rvKey):]
	end := bytes.IndexByte(b, '"')
	if end < 0 {
		return 0, false
	}
	rv, err := strconv.ParseUint(string(b[:end]), 10, 64)
	return rv, err == nil
}
