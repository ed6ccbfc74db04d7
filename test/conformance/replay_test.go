package conformance_test

import (
	"cmp"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/app"
	"github.com/opemu/opemu/test/conformance"
)

var (
	casesFlag = flag.String("cases", "", "replay only these cases: comma-separated names or glob patterns (stale excuses are then not checked)")
	dumpFlag  = flag.String("dump", "", "write every difference (declared or not) to this file, one JSON object a line: for triage")
)

// replayParallel is how many cases run at a time: they are independent (namespaces of their
// own), and most of a case's time is waiting for answers.
const replayParallel = 8

// TestReplay replays every case of the corpus against opemu, with the memory store and with the
// etcd store, normalises its answers as the recorder normalised kube-apiserver's, and fails on
// every difference that differences.yaml, notserved.yaml or defects.yaml does not declare, and
// on every declared excuse that excused nothing (stale: remove it).
func TestReplay(t *testing.T) {
	corpus, err := conformance.LoadCorpus("cases")
	require.NoError(t, err)
	recorded, _, err := conformance.LoadRecorded("recorded")
	require.NoError(t, err)
	lists, err := conformance.LoadDeclared(".")
	require.NoError(t, err)
	for _, c := range corpus.Cases {
		if _, ok := recorded[c.Name]; !ok {
			t.Errorf("case %s (%s) has no recording: go run ./test/conformance/record -cases %s", c.Name, c.Area, c.Name)
		}
	}
	names := map[string]bool{}
	for _, c := range corpus.Cases {
		names[c.Name] = true
	}
	for name := range recorded {
		if !names[name] {
			t.Errorf("recorded/ holds %s, which is no case of cases/: record again", name)
		}
	}
	cases, err := corpus.Select(*casesFlag)
	require.NoError(t, err)

	for _, store := range []string{app.StoreMemory, app.StoreEtcd} {
		t.Run(store, func(t *testing.T) {
			var runs []*conformance.Run
			start := time.Now()
			for mode, cases := range conformance.ByAuthorization(cases) {
				target := startOpemu(t, store, mode)
				require.NoError(t, target.ApplyFixtures(t.Context(), corpus.Fixtures))
				runs = append(runs, target.RunAll(t.Context(), cases, replayParallel)...)
			}
			took := time.Since(start)
			cl := conformance.NewClassifier(lists, store)
			var sum summary
			if *dumpFlag != "" {
				f, err := os.Create(*dumpFlag + "." + store)
				require.NoError(t, err)
				defer f.Close()
				sum.dump = json.NewEncoder(f)
			}
			for _, r := range runs {
				want, ok := recorded[r.Case.Name]
				if !ok {
					continue
				}
				t.Run(r.Case.Name, func(t *testing.T) {
					if r.Err != nil {
						t.Errorf("%s (%s): %v", r.Case.Name, r.Case.Area, r.Err)
					}
					got := conformance.Normalize(r)
					sum.add(t, r.Case, cl, want, got)
				})
			}
			t.Logf("%s: %d cases, %d compared steps in %s; %s", store, len(runs), sum.steps, took.Round(time.Millisecond), &sum)
			slowest := slices.SortedFunc(slices.Values(runs), func(a, b *conformance.Run) int { return cmp.Compare(b.Took, a.Took) })
			for _, r := range slowest[:min(5, len(slowest))] {
				t.Logf("slow: %s %s", r.Case.Name, r.Took.Round(time.Millisecond))
			}
			if *casesFlag != "" {
				return
			}
			for _, ref := range cl.Stale() {
				t.Errorf("%s excuses nothing with the %s store: remove it (fixed?) or correct it", ref, store)
			}
		})
	}
}

// summary counts a store's differences by class.
type summary struct {
	steps   int
	byClass map[string]int // differing paths
	cases   map[string]int // cases with a difference of the class
	dump    *json.Encoder  // -dump
}

func (s *summary) String() string {
	var parts []string
	for _, c := range []string{conformance.ClassDeliberate, conformance.ClassNotServed, conformance.ClassOracle, conformance.ClassDefect, "undeclared"} {
		parts = append(parts, fmt.Sprintf("%s: %d paths in %d cases", c, s.byClass[c], s.cases[c]))
	}
	return strings.Join(parts, "; ")
}

// add compares one case, reports its undeclared differences as a diff of the normalised
// answers of each step concerned, and counts.
func (s *summary) add(t *testing.T, c conformance.Case, cl *conformance.Classifier, want, got conformance.RecordedCase) {
	if s.byClass == nil {
		s.byClass, s.cases = map[string]int{}, map[string]int{}
	}
	s.steps += len(c.Steps)
	classes := map[string]bool{}
	var undeclared []conformance.Difference
	for _, d := range conformance.Compare(want, got) {
		v := cl.Classify(c.Name, d)
		class := v.Class
		if class == "" {
			class = "undeclared"
			undeclared = append(undeclared, d)
		}
		s.byClass[class]++
		classes[class] = true
		if s.dump != nil {
			_ = s.dump.Encode(map[string]any{"case": c.Name, "area": c.Area, "path": conformance.FormatPath(d.Path),
				"class": class, "id": v.ID, "kube": d.Want, "opemu": d.Got, "kubeMissing": d.WantMissing, "opemuMissing": d.GotMissing})
		}
	}
	for class := range classes {
		s.cases[class]++
	}
	if len(undeclared) == 0 {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "case %s (cases/%s.yaml): %d undeclared differences (kube-apiserver's recording, then opemu's answer):\n", c.Name, c.Area, len(undeclared))
	steps := map[string]bool{}
	for _, d := range undeclared {
		fmt.Fprintf(&b, "  %s\n", d)
		if len(d.Path) >= 2 && d.Path[0] == "steps" {
			steps[d.Path[1]] = true
		}
	}
	keys := make([]string, 0, len(steps))
	for k := range steps {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var i int
		fmt.Sscan(k, &i)
		if i < len(want.Steps) && i < len(got.Steps) {
			method := cmp.Or(c.Steps[i].Method, "GET")
			fmt.Fprintf(&b, "step %d %s %s (-kube +opemu):\n%s", i, method, c.Steps[i].Path, gocmp.Diff(want.Steps[i], got.Steps[i]))
		}
	}
	t.Error(b.String())
}
