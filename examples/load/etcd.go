package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The etcd mode measures what a create through opemu (STORE=etcd, controller off) costs beyond
// etcd itself (SPEC §12): in each round, creates through opemu (A), then raw etcd puts of the
// same objects, in the same transaction shape opemu uses (If(mod_revision == 0) Then(Put)), by
// the same number of clients (B). etcd is the floor; the target is A/B >= 0.5.
//
// Besides rates and latencies it reports the servers' CPU per operation: opemu's and etcd's in
// A, etcd's in B, from the process_cpu_seconds_total each serves on /metrics (opemu's needs
// no token from loopback; etcd serves it on its client URL), read before and after each side.
// The figures include whatever else those processes did meanwhile (opemu's Events, etcd's
// other clients).

// etcdResult is the etcd mode's result: the ab comparison of the create phase plus the
// servers' CPU.
type etcdResult struct {
	abResult
	CPU etcdCPU `json:"cpu"`
	// ACPURuns and BCPURuns are each round's figures.
	ACPURuns []sideCPU `json:"aCPURuns,omitempty"`
	BCPURuns []sideCPU `json:"bCPURuns,omitempty"`
}

// etcdCPU is the servers' CPU over the rounds (medians): microseconds of CPU per operation
// (per create in A, per put in B) and cores used while each side ran.
type etcdCPU struct {
	AOpemuUsPerOp float64 `json:"aOpemuUsPerOp"`
	AEtcdUsPerOp  float64 `json:"aEtcdUsPerOp"`
	BEtcdUsPerOp  float64 `json:"bEtcdUsPerOp"`
	AOpemuCores   float64 `json:"aOpemuCores"`
	AEtcdCores    float64 `json:"aEtcdCores"`
	BEtcdCores    float64 `json:"bEtcdCores"`
}

// sideCPU is what the servers used while one side of one round ran (its drain included).
type sideCPU struct {
	Seconds      float64 `json:"seconds"`
	Ops          int     `json:"ops"`
	OpemuSeconds float64 `json:"opemuSeconds"`
	EtcdSeconds  float64 `json:"etcdSeconds"`
}

func (s sideCPU) usPerOp(cpu float64) float64 {
	if s.Ops == 0 {
		return 0
	}
	return round3(cpu * 1e6 / float64(s.Ops))
}

func (s sideCPU) cores(cpu float64) float64 {
	if s.Seconds <= 0 {
		return 0
	}
	return round3(cpu / s.Seconds)
}

// runEtcdFloor runs o.rounds rounds of A then B and summarizes them as the ab mode does.
func runEtcdFloor(ctx context.Context, o options) (*etcdResult, error) {
	client, err := clientv3.New(clientv3.Config{Endpoints: []string{o.etcd}, Logger: zap.NewNop(), DialTimeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("etcd %s: %w", o.etcd, err)
	}
	defer client.Close()
	res := &etcdResult{abResult: abResult{Mode: "etcd", A: o.target, B: o.etcd, Rounds: o.rounds, Conns: o.conns}}
	meter := serverCPU{opemu: o.target + "/metrics", etcd: o.etcd + "/metrics"}
	var template [2][]byte
	for round := 1; round <= o.rounds; round++ {
		ao := o
		ao.phases = []string{"create"}
		ns := o.namespaceFor("a", round)
		before, err := meter.read(ctx)
		if err != nil {
			return nil, err
		}
		a, err := runAPI(ctx, ao, o.target, ns)
		if err != nil {
			return nil, fmt.Errorf("A: %w", err)
		}
		// opemu writes each create's Event after answering it: A's time runs until etcd is
		// quiet again, so B is not measured against A's leftovers and A gets no credit for them.
		drain, err := settle(ctx, client)
		if err != nil {
			return nil, err
		}
		after, err := meter.read(ctx)
		if err != nil {
			return nil, err
		}
		p := &a.Phases[0]
		p.DrainSeconds = round3(drain.Seconds())
		p.OpsPerSec = rate(p.Ops, time.Duration((p.Seconds+drain.Seconds())*float64(time.Second)))
		res.ARuns = append(res.ARuns, a)
		res.ACPURuns = append(res.ACPURuns, after.since(before, p.Seconds+drain.Seconds(), p.Ops))
		if template[0] == nil {
			if template, err = storedTemplate(ctx, o.target, ns); err != nil {
				return nil, err
			}
		}
		if before, err = meter.read(ctx); err != nil {
			return nil, err
		}
		b := runPuts(ctx, o, client, template, fmt.Sprintf("/loadfloor/%s/%d/", o.runID, round))
		if after, err = meter.read(ctx); err != nil {
			return nil, err
		}
		res.BRuns = append(res.BRuns, b)
		res.BCPURuns = append(res.BCPURuns, after.since(before, b.Phases[0].Seconds, b.Phases[0].Ops))
	}
	res.summarize([]string{"create"})
	var aO, aE, bE, aOc, aEc, bEc []float64
	for i := range res.ACPURuns {
		a, b := res.ACPURuns[i], res.BCPURuns[i]
		aO, aOc = append(aO, a.usPerOp(a.OpemuSeconds)), append(aOc, a.cores(a.OpemuSeconds))
		aE, aEc = append(aE, a.usPerOp(a.EtcdSeconds)), append(aEc, a.cores(a.EtcdSeconds))
		bE, bEc = append(bE, b.usPerOp(b.EtcdSeconds)), append(bEc, b.cores(b.EtcdSeconds))
	}
	res.CPU = etcdCPU{
		AOpemuUsPerOp: round3(median(aO)), AEtcdUsPerOp: round3(median(aE)), BEtcdUsPerOp: round3(median(bE)),
		AOpemuCores: round3(median(aOc)), AEtcdCores: round3(median(aEc)), BEtcdCores: round3(median(bEc)),
	}
	return res, nil
}

// writeTable prints the ab comparison, then the servers' CPU.
func (res *etcdResult) writeTable(w io.Writer) {
	res.abResult.writeTable(w)
	c := res.CPU
	table(w, [][]string{
		{"server CPU", "A opemu µs/op", "A etcd µs/op", "A total µs/op", "B etcd µs/op", "A opemu cores", "A etcd cores", "B etcd cores"},
		{"create", f0(c.AOpemuUsPerOp), f0(c.AEtcdUsPerOp), f0(c.AOpemuUsPerOp + c.AEtcdUsPerOp), f0(c.BEtcdUsPerOp), f2(c.AOpemuCores), f2(c.AEtcdCores), f2(c.BEtcdCores)},
	})
}

// serverCPU reads the CPU opemu and etcd have used from their /metrics.
type serverCPU struct{ opemu, etcd string }

// cpuReading is both servers' process_cpu_seconds_total at one moment.
type cpuReading struct {
	at          time.Time
	opemu, etcd float64
}

func (m serverCPU) read(ctx context.Context) (cpuReading, error) {
	r := cpuReading{at: time.Now()}
	var err error
	if r.opemu, err = processCPUSeconds(ctx, nil, m.opemu); err != nil {
		return r, err
	}
	if r.etcd, err = processCPUSeconds(ctx, nil, m.etcd); err != nil {
		return r, err
	}
	return r, nil
}

// since is what the servers used between before and r, for ops operations over seconds.
func (r cpuReading) since(before cpuReading, seconds float64, ops int) sideCPU {
	return sideCPU{Seconds: round3(seconds), Ops: ops, OpemuSeconds: round3(r.opemu - before.opemu), EtcdSeconds: round3(r.etcd - before.etcd)}
}

// processCPUSeconds reads process_cpu_seconds_total from a Prometheus text endpoint through c
// (nil: a plain client of its own).
func processCPUSeconds(ctx context.Context, c *http.Client, url string) (float64, error) {
	return metricValue(ctx, c, url, "process_cpu_seconds_total")
}

// metricValue reads the value of the unlabelled metric name from a Prometheus text endpoint
// through c (nil: a plain client of its own).
func metricValue(ctx context.Context, c *http.Client, url, name string) (float64, error) {
	if c == nil {
		c = newClient(1, 10*time.Second)
		defer closeClient(c)
	}
	body, err := do(ctx, c, http.MethodGet, url, "", nil, true)
	if err != nil {
		return 0, fmt.Errorf("reading %s from %s: %w", name, url, err)
	}
	prefix := []byte(name + " ")
	for line := range bytes.Lines(body) {
		if v, ok := bytes.CutPrefix(line, prefix); ok {
			return strconv.ParseFloat(string(bytes.TrimSpace(v)), 64)
		}
	}
	return 0, fmt.Errorf("no %s in %s", name, url)
}

// storedTemplate reads one Application opemu stored in ns and returns its JSON without
// resourceVersion (what opemu stores in etcd), split around its name.
func storedTemplate(ctx context.Context, target, ns string) ([2][]byte, error) {
	c := newClient(1, 10*time.Second)
	defer closeClient(c)
	body, err := do(ctx, c, http.MethodGet, appsURL(target, ns)+"/load-0-0", "", nil, true)
	if err != nil {
		return [2][]byte{}, fmt.Errorf("reading a created object: %w", err)
	}
	var obj map[string]any
	if err := json.Unmarshal(body, &obj); err != nil {
		return [2][]byte{}, err
	}
	md, _ := obj["metadata"].(map[string]any)
	delete(md, "resourceVersion")
	md["name"] = "\x00"
	raw, err := json.Marshal(obj)
	if err != nil {
		return [2][]byte{}, err
	}
	before, after, ok := bytes.Cut(raw, []byte(`"\u0000"`))
	if !ok {
		return [2][]byte{}, fmt.Errorf("no name in %s", raw)
	}
	return [2][]byte{append(before, '"'), append([]byte{'"'}, after...)}, nil
}

// runPuts creates keys under prefix with the template's objects from o.conns workers, for
// o.duration or o.n puts, one create transaction each.
func runPuts(ctx context.Context, o options, client *clientv3.Client, template [2][]byte, prefix string) *apiResult {
	r := &apiRun{o: o}
	pr := r.phase(ctx, "create", o.n, func(ctx context.Context, w, i int) error {
		name := "load-" + strconv.Itoa(w) + "-" + strconv.Itoa(i)
		value := make([]byte, 0, len(template[0])+len(name)+len(template[1]))
		value = append(append(append(value, template[0]...), name...), template[1]...)
		key := prefix + name
		resp, err := client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", 0)).Then(clientv3.OpPut(key, string(value))).Commit()
		if err == nil && !resp.Succeeded {
			err = fmt.Errorf("%s exists", key)
		}
		return err
	})
	return &apiResult{Mode: "etcd", Target: o.etcd, Namespace: prefix, Conns: o.conns, Phases: []phaseResult{pr}}
}

// settle waits until etcd's revision has not moved for 300 ms and returns how long it kept
// moving.
func settle(ctx context.Context, client *clientv3.Client) (time.Duration, error) {
	start := time.Now()
	var last int64
	lastChange := start
	for time.Since(lastChange) < 300*time.Millisecond {
		if time.Since(start) > time.Minute {
			return 0, fmt.Errorf("etcd still moving after a minute")
		}
		resp, err := client.Get(ctx, "/loadfloor-settle")
		if err != nil {
			return 0, err
		}
		if resp.Header.Revision != last {
			last, lastChange = resp.Header.Revision, time.Now()
		}
		time.Sleep(20 * time.Millisecond)
	}
	return max(lastChange.Sub(start)-20*time.Millisecond, 0), nil
}
