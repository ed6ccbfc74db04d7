package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// phaseResult is one phase of the api mode: every request counts in Ops, a failed one (an
// error or a non-2xx answer) in Errors as well; the latencies are those of all requests.
type phaseResult struct {
	Phase     string  `json:"phase"`
	Ops       int     `json:"ops"`
	Errors    int     `json:"errors"`
	Seconds   float64 `json:"seconds"`
	OpsPerSec float64 `json:"opsPerSec"`
	latencySummary
	// Items is the length of the list the list phase reads, counted once after it; in the
	// kube mode's watch phase, the watchers.
	Items int `json:"items,omitempty"`
	// Writes is the kube mode's watch phase's writes (Ops counts their deliveries).
	Writes  int     `json:"writes,omitempty"`
	LoadCPU float64 `json:"loadCPU"`
	// ServerCPU is the CPU the server used during the phase (cores) and ServerCPUPerOpUs that
	// CPU per request (µs), read from process_cpu_seconds_total on its /metrics before and
	// after; -1 when the server does not report it.
	ServerCPU        float64 `json:"serverCPU"`
	ServerCPUPerOpUs float64 `json:"serverCPUPerOpUs"`
	FirstError       string  `json:"firstError,omitempty"`
	// DrainSeconds (etcd mode) is how long the server kept writing after the phase's last
	// answer (the Events of its creates); OpsPerSec counts it.
	DrainSeconds float64 `json:"drainSeconds,omitempty"`
}

// apiResult is one run of the api phases against one server.
type apiResult struct {
	Mode      string        `json:"mode"`
	Target    string        `json:"target"`
	Namespace string        `json:"namespace"`
	Conns     int           `json:"conns"`
	Phases    []phaseResult `json:"phases"`
}

// apiRun is the state of one run: the phases run one after another, each with o.conns
// workers; names is written by the create phase and only read after it.
type apiRun struct {
	o      options
	c      *http.Client
	target string
	ns     string
	names  []string
	// kind is what create, get and list work on; the zero value is Applications.
	kind workload
}

// workload is the kind a run creates, reads and lists: its collection's URL and the body of a
// new object.
type workload struct {
	collection func(target, ns string) string
	newObject  func(name, ns string) []byte
}

func (r *apiRun) collection(ns string) string {
	if r.kind.collection == nil {
		return appsURL(r.target, ns)
	}
	return r.kind.collection(r.target, ns)
}

func (r *apiRun) newObject(name, ns string) []byte {
	if r.kind.newObject == nil {
		return appBody(name, ns, 3)
	}
	return r.kind.newObject(name, ns)
}

// runAPI creates namespace ns on target (it should not exist yet) and runs o.phases in it. It
// returns an error only when the run could not start (target unreachable, the namespace or the
// list's seeding failed); failed requests are counted in the result.
func runAPI(ctx context.Context, o options, target, ns string) (*apiResult, error) {
	r := &apiRun{o: o, c: newClient(o.conns, 30*time.Second), target: target, ns: ns}
	defer closeClient(r.c)
	if _, err := do(ctx, r.c, http.MethodGet, target+"/healthz", "", nil, false); err != nil {
		return nil, fmt.Errorf("target %s: %w", target, err)
	}
	if err := createNamespace(ctx, r.c, target, ns); err != nil {
		return nil, fmt.Errorf("target %s: %w", target, err)
	}
	res := &apiResult{Mode: "api", Target: target, Namespace: ns, Conns: o.conns}
	for _, p := range o.phases {
		var pr phaseResult
		switch p {
		case "create":
			pr = r.create(ctx)
		case "get":
			pr = r.get(ctx)
		case "update":
			pr = r.update(ctx)
		case "patch":
			pr = r.patch(ctx)
		case "list":
			var err error
			if pr, err = r.list(ctx); err != nil {
				return nil, err
			}
		}
		res.Phases = append(res.Phases, pr)
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
	}
	return res, nil
}

// create POSTs new objects (Applications unless the run's kind says otherwise) named
// load-<worker>-<i> and keeps the names that were created.
func (r *apiRun) create(ctx context.Context) phaseResult {
	url := r.collection(r.ns)
	created := make([][]string, r.o.conns) // one slice per worker
	pr := r.phase(ctx, "create", r.o.n, func(ctx context.Context, w, i int) error {
		name := "load-" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
		_, err := do(ctx, r.c, http.MethodPost, url, "application/json", r.newObject(name, r.ns), false)
		if err == nil {
			created[w] = append(created[w], name)
		}
		return err
	})
	for _, c := range created {
		r.names = append(r.names, c...)
	}
	return pr
}

// get reads objects picked at random among those created.
func (r *apiRun) get(ctx context.Context) phaseResult {
	url := r.collection(r.ns) + "/"
	return r.phase(ctx, "get", r.o.n, func(ctx context.Context, _, _ int) error {
		if len(r.names) == 0 {
			return errNothingCreated
		}
		_, err := do(ctx, r.c, http.MethodGet, url+r.names[rand.IntN(len(r.names))], "", nil, false)
		return err
	})
}

// update replaces Applications (PUT without a resourceVersion, so it never conflicts),
// changing spec.replicas each time. Worker w takes objects w, w+conns, ... so no two workers
// write one object at once until the objects run out and the sequence wraps.
func (r *apiRun) update(ctx context.Context) phaseResult {
	url := appsURL(r.target, r.ns) + "/"
	return r.phase(ctx, "update", r.o.n, func(ctx context.Context, w, i int) error {
		if len(r.names) == 0 {
			return errNothingCreated
		}
		k := w + i*r.o.conns
		name := r.names[k%len(r.names)]
		replicas := 4 + k/len(r.names)%2
		_, err := do(ctx, r.c, http.MethodPut, url+name, "application/json", appBody(name, r.ns, replicas), false)
		return err
	})
}

// patch changes spec.replicas of Applications with a JSON merge patch, taking the objects in
// the order update does.
func (r *apiRun) patch(ctx context.Context) phaseResult {
	url := appsURL(r.target, r.ns) + "/"
	return r.phase(ctx, "patch", r.o.n, func(ctx context.Context, w, i int) error {
		if len(r.names) == 0 {
			return errNothingCreated
		}
		k := w + i*r.o.conns
		name := r.names[k%len(r.names)]
		body := []byte(`{"spec":{"replicas":` + strconv.Itoa(6+k/len(r.names)%2) + `}}`)
		_, err := do(ctx, r.c, http.MethodPatch, url+name, "application/merge-patch+json", body, false)
		return err
	})
}

// list reads the whole list of the run's namespace, or with -list-items of a namespace seeded
// beforehand with that many objects; with -list-limit, its first page.
func (r *apiRun) list(ctx context.Context) (phaseResult, error) {
	ns := r.ns
	if r.o.listItems > 0 {
		ns += "-list"
		if err := createNamespace(ctx, r.c, r.target, ns); err != nil {
			return phaseResult{}, fmt.Errorf("seed %s: %w", ns, err)
		}
		if err := r.seed(ctx, ns, r.o.listItems); err != nil {
			return phaseResult{}, fmt.Errorf("seed %s: %w", ns, err)
		}
	}
	url := r.collection(ns)
	if r.o.listLimit > 0 {
		url += "?limit=" + strconv.Itoa(r.o.listLimit)
	}
	pr := r.phase(ctx, "list", r.o.listN, func(ctx context.Context, _, _ int) error {
		_, err := do(ctx, r.c, http.MethodGet, url, "", nil, false)
		return err
	})
	if body, err := do(ctx, r.c, http.MethodGet, url, "", nil, true); err == nil {
		var l struct{ Items []json.RawMessage }
		if json.Unmarshal(body, &l) == nil {
			pr.Items = len(l.Items)
		}
	}
	return pr, nil
}

// seed creates count objects named seed-<i> in ns, untimed.
func (r *apiRun) seed(ctx context.Context, ns string, count int) error {
	url := r.collection(ns)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, r.o.conns)
	for w := range r.o.conns {
		wg.Go(func() {
			for i := int(next.Add(1)); i <= count && errs[w] == nil; i = int(next.Add(1)) {
				_, errs[w] = do(ctx, r.c, http.MethodPost, url, "application/json", r.newObject("seed-"+strconv.Itoa(i), ns), false)
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

var errNothingCreated = errors.New("load: no object was created to read or write")

// phase runs op from o.conns workers until n requests were sent in all (n > 0) or o.duration
// has passed, and summarizes them. op(ctx, worker, i) is called with i = 0, 1, ... per worker;
// each worker calls it sequentially, so state indexed by worker needs no lock.
func (r *apiRun) phase(ctx context.Context, name string, n int, op func(ctx context.Context, worker, i int) error) phaseResult {
	type workerStats struct {
		lat      []time.Duration
		errs     int
		firstErr string
	}
	stats := make([]workerStats, r.o.conns)
	var sent atomic.Int64
	var wg sync.WaitGroup
	serverBefore, serverOK := readServerCPU(ctx, r.c, r.target)
	cpu := startCPU()
	start := time.Now()
	deadline := start.Add(r.o.duration)
	for w := range r.o.conns {
		wg.Go(func() {
			st := &stats[w]
			for i := 0; ctx.Err() == nil; i++ {
				if n > 0 && sent.Add(1) > int64(n) || n == 0 && !time.Now().Before(deadline) {
					return
				}
				t := time.Now()
				err := op(ctx, w, i)
				st.lat = append(st.lat, time.Since(t))
				if err != nil {
					if st.errs == 0 {
						st.firstErr = err.Error()
					}
					st.errs++
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	pr := phaseResult{Phase: name, Seconds: round3(elapsed.Seconds()), LoadCPU: cpu.cores(), ServerCPU: -1, ServerCPUPerOpUs: -1}
	serverAfter, afterOK := readServerCPU(ctx, r.c, r.target)
	var all []time.Duration
	for _, st := range stats {
		all = append(all, st.lat...)
		pr.Errors += st.errs
		if pr.FirstError == "" {
			pr.FirstError = st.firstErr
		}
	}
	pr.Ops = len(all)
	pr.OpsPerSec = rate(pr.Ops, elapsed)
	pr.latencySummary = summarize(all)
	if serverOK && afterOK && pr.Ops > 0 {
		used := (serverAfter - serverBefore).Seconds()
		pr.ServerCPU = round3(used / elapsed.Seconds())
		pr.ServerCPUPerOpUs = round3(used / float64(pr.Ops) * 1e6)
	}
	return pr
}

func (res *apiResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "target %s  namespace %s  conns %d\n", res.Target, res.Namespace, res.Conns)
	rows := [][]string{{"phase", "ops", "ops/s", "p50 ms", "p99 ms", "max ms", "errors", "items", "loadCPU", "serverCPU", "server µs/op"}}
	for _, p := range res.Phases {
		rows = append(rows, []string{p.Phase, strconv.Itoa(p.Ops), f0(p.OpsPerSec), f2(p.P50Ms), f2(p.P99Ms),
			f2(p.MaxMs), strconv.Itoa(p.Errors), strconv.Itoa(p.Items), f2(p.LoadCPU), f2(p.ServerCPU), f0(p.ServerCPUPerOpUs)})
	}
	table(w, rows)
	for _, p := range res.Phases {
		if p.FirstError != "" {
			fmt.Fprintf(w, "%s: first error: %s\n", p.Phase, p.FirstError)
		}
	}
}

func (res *apiResult) failure() error {
	return phasesFailure(res.Phases)
}

// phasesFailure reports the failed requests of phases, if any.
func phasesFailure(phases []phaseResult) error {
	n, first := 0, ""
	for _, p := range phases {
		n += p.Errors
		if first == "" {
			first = p.FirstError
		}
	}
	if n > 0 {
		return fmt.Errorf("%d requests failed; first: %s", n, first)
	}
	return nil
}
