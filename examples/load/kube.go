package main

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The kube mode measures opemu against the real kube-apiserver (SPEC §10, issue 30): the same
// workload on ConfigMaps (a kind both serve, with every patch type) against -kube and each of
// -opemu, over HTTPS with a bearer token on each. In each round every phase runs against every
// target before the next phase starts, the first target of a round rotating, so drift on the
// shared machine (heat, other load, a growing store) hits all sides alike. Each side's figure
// is the median over the rounds with its range, and each opemu's ratio to kube-apiserver is the
// median of the ratios of the rounds.

// kubePhases are the kube mode's default phases: the api mode's, with each patch type of
// kube-apiserver as a phase of its own, and the watch fan-out.
const kubePhases = "create,get,update,patch-merge,patch-json,patch-strategic,apply,list,watch"

// kubeSide is one target's figures for one phase, over the rounds.
type kubeSide struct {
	Target string `json:"target"`
	// OpsPerSec is the median over the rounds, OpsMin and OpsMax its range.
	OpsPerSec float64 `json:"opsPerSec"`
	OpsMin    float64 `json:"opsMin"`
	OpsMax    float64 `json:"opsMax"`
	// Ratio is the median over the rounds of this side's ops/s over kube-apiserver's in the same
	// round, RatioMin and RatioMax its range (1 for kube-apiserver itself).
	Ratio    float64 `json:"ratio"`
	RatioMin float64 `json:"ratioMin"`
	RatioMax float64 `json:"ratioMax"`
	P50Ms    float64 `json:"p50Ms"`
	P99Ms    float64 `json:"p99Ms"`
	// ServerCPUPerOpUs is the median of the server's CPU per operation (µs; -1 when it does
	// not report it). An opemu with STORE=etcd and kube-apiserver leave etcd's CPU out.
	ServerCPUPerOpUs float64 `json:"serverCPUPerOpUs"`
	LoadCPU          float64 `json:"loadCPU"`
	Errors           int     `json:"errors"`
	// Items is what the last round's list phase read, or its watch phase's watchers.
	Items int `json:"items,omitempty"`
}

// kubePhase is one phase on every target: Sides[0] is kube-apiserver, then each opemu.
type kubePhase struct {
	Phase string     `json:"phase"`
	Sides []kubeSide `json:"sides"`
}

// kubeResult is the kube mode's result.
type kubeResult struct {
	Mode      string      `json:"mode"`
	Kube      string      `json:"kube"`
	Opemu     []string    `json:"opemu"`
	Rounds    int         `json:"rounds"`
	Conns     int         `json:"conns"`
	Watchers  int         `json:"watchers"`
	ListItems int         `json:"listItems"`
	Phases    []kubePhase `json:"phases"`
	// Runs holds every run: Runs[t][r] is target t (kube-apiserver first) in round r.
	Runs [][]*apiResult `json:"runs,omitempty"`
}

// kubeTarget is a server the kube mode measures.
type kubeTarget struct{ url, token string }

// runKube runs o.rounds rounds of o.phases against kube-apiserver and every opemu.
func runKube(ctx context.Context, o options) (*kubeResult, error) {
	roots, err := loadRoots(o.caFiles)
	if err != nil {
		return nil, fmt.Errorf("-cacert: %w", err)
	}
	targets := []kubeTarget{{o.kube, o.kubeToken}}
	for _, u := range o.opemu {
		targets = append(targets, kubeTarget{u, o.opemuToken})
	}
	res := &kubeResult{Mode: "kube", Kube: o.kube, Opemu: o.opemu, Rounds: o.rounds, Conns: o.conns,
		Watchers: o.watchers, ListItems: o.listItems, Runs: make([][]*apiResult, len(targets))}
	for round := 1; round <= o.rounds; round++ {
		runs := make([]*kubeRun, len(targets))
		for i, t := range targets {
			r, err := newKubeRun(ctx, o, t, roots, o.namespaceFor("t"+strconv.Itoa(i)+"-", round))
			if err != nil {
				return nil, err
			}
			defer r.close()
			runs[i] = r
			res.Runs[i] = append(res.Runs[i], &apiResult{Mode: "kube", Target: t.url, Namespace: r.ns, Conns: o.conns})
		}
		for _, p := range o.phases {
			for j := range targets {
				i := (j + round - 1) % len(targets)
				pr, err := runs[i].run(ctx, p)
				if err != nil {
					return nil, fmt.Errorf("%s: %s: %w", targets[i].url, p, err)
				}
				run := res.Runs[i][round-1]
				run.Phases = append(run.Phases, pr)
			}
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
		}
	}
	res.summarize(o.phases)
	return res, nil
}

// summarize fills Phases from Runs.
func (res *kubeResult) summarize(phases []string) {
	for pi, name := range phases {
		kp := kubePhase{Phase: name}
		for t, runs := range res.Runs {
			var ops, ratios, p50, p99, srv, load []float64
			s := kubeSide{Target: runs[0].Target}
			for r, run := range runs {
				p := run.Phases[pi]
				ops, p50, p99 = append(ops, p.OpsPerSec), append(p50, p.P50Ms), append(p99, p.P99Ms)
				srv, load = append(srv, p.ServerCPUPerOpUs), append(load, p.LoadCPU)
				if k := res.Runs[0][r].Phases[pi].OpsPerSec; k > 0 {
					ratios = append(ratios, p.OpsPerSec/k)
				}
				s.Errors += p.Errors
				s.Items = p.Items
			}
			s.OpsPerSec, s.OpsMin, s.OpsMax = round3(median(ops)), round3(minOf(ops)), round3(maxOf(ops))
			s.Ratio, s.RatioMin, s.RatioMax = round3(median(ratios)), round3(minOf(ratios)), round3(maxOf(ratios))
			s.P50Ms, s.P99Ms = round3(median(p50)), round3(median(p99))
			s.ServerCPUPerOpUs, s.LoadCPU = round3(median(srv)), round3(median(load))
			if t == 0 {
				s.Ratio, s.RatioMin, s.RatioMax = 1, 1, 1
			}
			kp.Sides = append(kp.Sides, s)
		}
		res.Phases = append(res.Phases, kp)
	}
}

// minOf and maxOf are slices.Min and slices.Max, with 0 for none.
func minOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Min(xs)
}

func maxOf(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return slices.Max(xs)
}

// writeTable prints one row per phase and target, then the summary as one JSON line.
func (res *kubeResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "kube-apiserver %s  opemu %s  rounds %d  conns %d  watchers %d  list items %d  (medians over rounds, [min-max])\n",
		res.Kube, strings.Join(res.Opemu, ", "), res.Rounds, res.Conns, res.Watchers, res.ListItems)
	rows := [][]string{{"phase", "target", "ops/s", "range", "× kube", "× range", "p50 ms", "p99 ms", "srv µs/op", "loadCPU", "errors", "items"}}
	for _, p := range res.Phases {
		for _, s := range p.Sides {
			rows = append(rows, []string{p.Phase, s.Target, f0(s.OpsPerSec), f0(s.OpsMin) + "-" + f0(s.OpsMax),
				f2(s.Ratio), f2(s.RatioMin) + "-" + f2(s.RatioMax), f2(s.P50Ms), f2(s.P99Ms), f0(s.ServerCPUPerOpUs),
				f2(s.LoadCPU), strconv.Itoa(s.Errors), strconv.Itoa(s.Items)})
		}
	}
	table(w, rows)
	for _, runs := range res.Runs {
		for _, r := range runs {
			for _, p := range r.Phases {
				if p.FirstError != "" {
					fmt.Fprintf(w, "%s %s: first error: %s\n", r.Target, p.Phase, p.FirstError)
				}
			}
		}
	}
	summary := *res
	summary.Runs = nil
	line, _ := json.Marshal(summary)
	fmt.Fprintf(w, "%s\n", line)
}

func (res *kubeResult) failure() error {
	var all []phaseResult
	for _, runs := range res.Runs {
		for _, r := range runs {
			all = append(all, r.Phases...)
		}
	}
	return phasesFailure(all)
}

// kubeRun is one target's state in one round: the api mode's run (its client, namespace and
// the names the create phase made), on ConfigMaps, plus a client for watch streams.
type kubeRun struct {
	apiRun
	streams *http.Client
}

// newKubeRun checks that the target answers with its token and creates the round's namespace.
func newKubeRun(ctx context.Context, o options, t kubeTarget, roots *x509.CertPool, ns string) (*kubeRun, error) {
	r := &kubeRun{
		apiRun: apiRun{o: o, c: newTargetClient(o.conns, 30*time.Second, roots, t.token), target: t.url, ns: ns,
			kind: workload{collection: cmURL, newObject: func(name, ns string) []byte { return cmBody(name, ns, "created") }}},
		streams: newTargetClient(o.watchers, 0, roots, t.token),
	}
	// /api needs the token on both (kube-apiserver lets anyone read /healthz).
	if _, err := do(ctx, r.c, http.MethodGet, t.url+"/api", "", nil, false); err != nil {
		r.close()
		return nil, fmt.Errorf("target %s: %w", t.url, err)
	}
	if err := createNamespace(ctx, r.c, t.url, ns); err != nil {
		r.close()
		return nil, fmt.Errorf("target %s: %w", t.url, err)
	}
	return r, nil
}

func (r *kubeRun) close() {
	closeClient(r.c)
	closeClient(r.streams)
}

// run runs one phase. It returns an error only when the phase could not start (its seeding
// failed, or no watcher connected); failed requests are counted in the result.
func (r *kubeRun) run(ctx context.Context, phase string) (phaseResult, error) {
	value := func(name string) func(string, int) []byte {
		return func(obj string, pass int) []byte { return cmBody(obj, r.ns, name+"-"+strconv.Itoa(pass%2)) }
	}
	switch phase {
	case "create":
		return r.create(ctx), nil
	case "get":
		return r.get(ctx), nil
	case "update":
		return r.write(ctx, phase, http.MethodPut, "application/json", "", value("update")), nil
	case "patch-merge":
		return r.write(ctx, phase, http.MethodPatch, "application/merge-patch+json", "", dataPatch("merge")), nil
	case "patch-strategic":
		return r.write(ctx, phase, http.MethodPatch, "application/strategic-merge-patch+json", "", dataPatch("strategic")), nil
	case "patch-json":
		return r.write(ctx, phase, http.MethodPatch, "application/json-patch+json", "", func(_ string, pass int) []byte {
			return []byte(`[{"op":"replace","path":"/data/k","value":"json-` + strconv.Itoa(pass%2) + `"}]`)
		}), nil
	case "apply":
		return r.write(ctx, phase, http.MethodPatch, "application/apply-patch+yaml", "?fieldManager=load&force=true", value("apply")), nil
	case "list":
		return r.list(ctx)
	case "watch":
		return r.watch(ctx)
	}
	return phaseResult{}, fmt.Errorf("unknown phase %q", phase)
}

// cmURL is the ConfigMaps collection of namespace ns on target.
func cmURL(target, ns string) string {
	return target + "/api/v1/namespaces/" + ns + "/configmaps"
}

// cmBody is a ConfigMap as the kube mode creates, replaces and applies it: one key, k.
func cmBody(name, ns, value string) []byte {
	return []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"` + ns +
		`"},"data":{"k":"` + value + `"}}`)
}

// dataPatch is a merge or strategic merge patch setting data.k to <tag>-<pass mod 2>.
func dataPatch(tag string) func(string, int) []byte {
	return func(_ string, pass int) []byte {
		return []byte(`{"data":{"k":"` + tag + "-" + strconv.Itoa(pass%2) + `"}}`)
	}
}

// write sends method with ctype to the created ConfigMaps in the order the api mode's update
// takes them (worker w takes objects w, w+conns, ...), each body made by body(name, pass) where
// pass counts how often the sequence has wrapped: consecutive writes to one object differ, so
// each is a change.
func (r *kubeRun) write(ctx context.Context, phase, method, ctype, query string, body func(name string, pass int) []byte) phaseResult {
	url := cmURL(r.target, r.ns) + "/"
	return r.phase(ctx, phase, r.o.n, func(ctx context.Context, w, i int) error {
		if len(r.names) == 0 {
			return errNothingCreated
		}
		k := w + i*r.o.conns
		name := r.names[k%len(r.names)]
		_, err := do(ctx, r.c, method, url+name+query, ctype, body(name, k/len(r.names)), false)
		return err
	})
}
