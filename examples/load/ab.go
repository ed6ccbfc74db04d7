package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
)

// abPhase compares one phase across rounds: medians over the rounds of each side's ops/s,
// p50 and p99, and Ratio = AOpsPerSec / BOpsPerSec.
type abPhase struct {
	Phase      string  `json:"phase"`
	AOpsPerSec float64 `json:"aOpsPerSec"`
	BOpsPerSec float64 `json:"bOpsPerSec"`
	Ratio      float64 `json:"ratio"`
	AP50Ms     float64 `json:"aP50Ms"`
	AP99Ms     float64 `json:"aP99Ms"`
	BP50Ms     float64 `json:"bP50Ms"`
	BP99Ms     float64 `json:"bP99Ms"`
	// ALoadCPU and BLoadCPU are the load tool's own CPU use (cores) while it drove each side.
	ALoadCPU float64 `json:"aLoadCPU"`
	BLoadCPU float64 `json:"bLoadCPU"`
	// AServerCPUPerOpUs and BServerCPUPerOpUs are each server's CPU per request (µs), and
	// AServerCPU and BServerCPU the cores it used; -1 when a server does not report its CPU.
	AServerCPUPerOpUs float64 `json:"aServerCPUPerOpUs"`
	BServerCPUPerOpUs float64 `json:"bServerCPUPerOpUs"`
	AServerCPU        float64 `json:"aServerCPU"`
	BServerCPU        float64 `json:"bServerCPU"`
	AErrors           int     `json:"aErrors"`
	BErrors           int     `json:"bErrors"`
	// AItems and BItems are the list lengths of the last round (list phase only): without
	// -list-items they follow each side's create rate, so the list rates are not comparable.
	AItems int `json:"aItems,omitempty"`
	BItems int `json:"bItems,omitempty"`
}

// abResult is the ab mode: the api phases run against A, then B, alternately for Rounds
// rounds, so drift on the shared machine (heat, other load, a growing store) hits both sides.
type abResult struct {
	Mode   string    `json:"mode"`
	A      string    `json:"a"`
	B      string    `json:"b"`
	Rounds int       `json:"rounds"`
	Conns  int       `json:"conns"`
	Phases []abPhase `json:"phases"`
	// ARuns and BRuns hold every run, round by round (left out of the table's summary line).
	ARuns []*apiResult `json:"aRuns,omitempty"`
	BRuns []*apiResult `json:"bRuns,omitempty"`
}

// runAB runs o.rounds rounds of the api phases, A before B in each, each run in a namespace of
// its own.
func runAB(ctx context.Context, o options) (*abResult, error) {
	res := &abResult{Mode: "ab", A: o.a, B: o.b, Rounds: o.rounds, Conns: o.conns}
	for round := 1; round <= o.rounds; round++ {
		a, err := runAPI(ctx, o, o.a, o.namespaceFor("a", round))
		if err != nil {
			return nil, fmt.Errorf("A: %w", err)
		}
		res.ARuns = append(res.ARuns, a)
		b, err := runAPI(ctx, o, o.b, o.namespaceFor("b", round))
		if err != nil {
			return nil, fmt.Errorf("B: %w", err)
		}
		res.BRuns = append(res.BRuns, b)
	}
	res.summarize(o.phases)
	return res, nil
}

// summarize fills Phases with the medians over the rounds of each of phases.
func (res *abResult) summarize(phases []string) {
	for i, name := range phases {
		var aOps, bOps, aP50, aP99, bP50, bP99, aCPU, bCPU, aSrv, bSrv, aSrvOp, bSrvOp []float64
		p := abPhase{Phase: name}
		for r := range res.Rounds {
			a, b := res.ARuns[r].Phases[i], res.BRuns[r].Phases[i]
			aOps, bOps = append(aOps, a.OpsPerSec), append(bOps, b.OpsPerSec)
			aP50, aP99 = append(aP50, a.P50Ms), append(aP99, a.P99Ms)
			bP50, bP99 = append(bP50, b.P50Ms), append(bP99, b.P99Ms)
			aCPU, bCPU = append(aCPU, a.LoadCPU), append(bCPU, b.LoadCPU)
			aSrv, bSrv = append(aSrv, a.ServerCPU), append(bSrv, b.ServerCPU)
			aSrvOp, bSrvOp = append(aSrvOp, a.ServerCPUPerOpUs), append(bSrvOp, b.ServerCPUPerOpUs)
			p.AErrors += a.Errors
			p.BErrors += b.Errors
			p.AItems, p.BItems = a.Items, b.Items
		}
		p.AOpsPerSec, p.BOpsPerSec = round3(median(aOps)), round3(median(bOps))
		p.AP50Ms, p.AP99Ms = round3(median(aP50)), round3(median(aP99))
		p.BP50Ms, p.BP99Ms = round3(median(bP50)), round3(median(bP99))
		p.ALoadCPU, p.BLoadCPU = round3(median(aCPU)), round3(median(bCPU))
		p.AServerCPU, p.BServerCPU = round3(median(aSrv)), round3(median(bSrv))
		p.AServerCPUPerOpUs, p.BServerCPUPerOpUs = round3(median(aSrvOp)), round3(median(bSrvOp))
		if p.BOpsPerSec > 0 {
			p.Ratio = round3(p.AOpsPerSec / p.BOpsPerSec)
		}
		res.Phases = append(res.Phases, p)
	}
}

// writeTable prints the comparison, then the medians as one JSON line for scripts.
func (res *abResult) writeTable(w io.Writer) {
	fmt.Fprintf(w, "A %s  B %s  rounds %d  conns %d  (medians over rounds)\n", res.A, res.B, res.Rounds, res.Conns)
	rows := [][]string{{"phase", "A ops/s", "B ops/s", "A/B", "A p50 ms", "A p99 ms", "B p50 ms", "B p99 ms", "A err", "B err",
		"A items", "B items", "A loadCPU", "B loadCPU", "A srvCPU", "B srvCPU", "A µs/op", "B µs/op"}}
	for _, p := range res.Phases {
		rows = append(rows, []string{p.Phase, f0(p.AOpsPerSec), f0(p.BOpsPerSec), f2(p.Ratio), f2(p.AP50Ms),
			f2(p.AP99Ms), f2(p.BP50Ms), f2(p.BP99Ms), strconv.Itoa(p.AErrors), strconv.Itoa(p.BErrors),
			strconv.Itoa(p.AItems), strconv.Itoa(p.BItems), f2(p.ALoadCPU), f2(p.BLoadCPU),
			f2(p.AServerCPU), f2(p.BServerCPU), f0(p.AServerCPUPerOpUs), f0(p.BServerCPUPerOpUs)})
	}
	table(w, rows)
	for _, runs := range [][]*apiResult{res.ARuns, res.BRuns} {
		for _, r := range runs {
			for _, p := range r.Phases {
				if p.FirstError != "" {
					fmt.Fprintf(w, "%s %s: first error: %s\n", r.Target, p.Phase, p.FirstError)
				}
			}
		}
	}
	summary := *res
	summary.ARuns, summary.BRuns = nil, nil
	line, _ := json.Marshal(summary)
	fmt.Fprintf(w, "%s\n", line)
}

func (res *abResult) failure() error {
	var all []phaseResult
	for _, runs := range [][]*apiResult{res.ARuns, res.BRuns} {
		for _, r := range runs {
			all = append(all, r.Phases...)
		}
	}
	return phasesFailure(all)
}
