package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

// suiteReport is the part of ginkgo's JSON report (-ginkgo.json-report, a list of
// types.Report) the runner reads: each spec's place, state and failure.
type suiteReport struct {
	SuiteDescription           string
	SuiteSucceeded             bool
	SpecialSuiteFailureReasons []string
	SpecReports                []specReport
}

type specReport struct {
	ContainerHierarchyTexts []string
	LeafNodeType            string
	LeafNodeText            string
	State                   string
	Failure                 struct {
		Message  string
		Location struct {
			FileName   string
			LineNumber int
		}
		FailureNodeType string `json:",omitempty"`
	}
}

// name is the spec's full text, as ginkgo prints it.
func (s specReport) name() string {
	return strings.Join(append(append([]string{}, s.ContainerHierarchyTexts...), s.LeafNodeText), " ")
}

// result is one package's outcome: its ginkgo specs (It nodes) by state, its plain Go tests
// (top-level tests that do not run a ginkgo suite), and every failure with its message.
type result struct {
	Package  string
	Passed   int
	Failed   int
	Skipped  int
	Pending  int // marked pending upstream (PIt): never run anywhere
	GoPassed int
	GoFailed int
	GoSkip   int
	// Note says why the counts are incomplete (no report: the run timed out or did not
	// build), empty when the report was read.
	Note     string
	Failures []failure
	Seconds  float64
	Requests int // API requests opemu answered during the run
	// NotRun is the pattern of tests not run as not applicable to an existing cluster and why
	// (notApplicable); empty when every test ran.
	NotRun string
}

type failure struct {
	Package string
	Name    string
	Message string // the failure's message, its first lines
	Where   string // file:line of the failed assertion
}

// readGinkgo adds the specs of ginkgo's JSON report at path to r. Suite-level nodes
// (BeforeSuite, AfterSuite, ...) are not specs; when one fails it is kept as a failure.
func readGinkgo(path string, r *result) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var reports []suiteReport
	if err := json.Unmarshal(b, &reports); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	for _, rep := range reports {
		for _, s := range rep.SpecReports {
			failed := s.State != "passed" && s.State != "skipped" && s.State != "pending"
			if s.LeafNodeType != "It" {
				if failed {
					r.Failures = append(r.Failures, newFailure(r.Package, "["+s.LeafNodeType+"]", s))
				}
				continue
			}
			switch {
			case s.State == "passed":
				r.Passed++
			case s.State == "pending":
				r.Pending++
			case !failed:
				r.Skipped++
			default:
				r.Failed++
				r.Failures = append(r.Failures, newFailure(r.Package, s.name(), s))
			}
		}
	}
	return nil
}

func newFailure(pkg, name string, s specReport) failure {
	where := ""
	if s.Failure.Location.FileName != "" {
		where = fmt.Sprintf("%s:%d", trimSource(s.Failure.Location.FileName), s.Failure.Location.LineNumber)
	}
	msg := s.Failure.Message
	if s.State != "failed" {
		msg = "[" + s.State + "] " + msg
	}
	return failure{Package: pkg, Name: name, Message: firstLines(msg, 12), Where: where}
}

// trimSource cuts a path in the copied source down to its path in controller-runtime.
func trimSource(p string) string {
	if i := strings.Index(p, "/pkg/"); i >= 0 {
		return p[i+1:]
	}
	return p
}

func firstLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, "\n")
}

// testEvent is one line of `go test -json` (test2json).
type testEvent struct {
	Action string
	Test   string
	Output string
}

// readGoTests adds the Go tests in the `go test -json` stream to r, counting leaves (tests
// without subtests), except a test that runs a ginkgo suite (its specs are counted from the
// report); it writes the stream's output text to log.
func readGoTests(stream io.Reader, r *result, log io.Writer) error {
	ginkgo := map[string]bool{}
	outcome := map[string]string{}
	parent := map[string]bool{}
	var order []string
	output := map[string]*strings.Builder{}
	sc := bufio.NewScanner(stream)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e testEvent
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			fmt.Fprintln(log, sc.Text()) // build errors are plain text
			continue
		}
		io.WriteString(log, e.Output)
		if e.Test == "" {
			continue
		}
		for p := e.Test; strings.Contains(p, "/"); {
			p = p[:strings.LastIndex(p, "/")]
			parent[p] = true
		}
		if strings.Contains(e.Output, "Running Suite:") {
			ginkgo[e.Test] = true
		}
		if output[e.Test] == nil {
			output[e.Test] = &strings.Builder{}
		}
		output[e.Test].WriteString(e.Output)
		switch e.Action {
		case "pass", "fail", "skip":
			if _, seen := outcome[e.Test]; !seen {
				order = append(order, e.Test)
			}
			outcome[e.Test] = e.Action
		}
	}
	for _, t := range order {
		if ginkgo[t] || parent[t] {
			continue
		}
		switch outcome[t] {
		case "pass":
			r.GoPassed++
		case "skip":
			r.GoSkip++
		default:
			r.GoFailed++
			r.Failures = append(r.Failures, failure{Package: r.Package, Name: t, Message: testMessage(output[t].String())})
		}
	}
	return sc.Err()
}

// testMessage is a failed Go test's output without go test's own === and --- lines.
func testMessage(out string) string {
	var keep []string
	for _, l := range strings.Split(out, "\n") {
		if t := strings.TrimSpace(l); t != "" && !strings.HasPrefix(t, "=== ") && !strings.HasPrefix(t, "--- ") {
			keep = append(keep, l)
		}
	}
	return firstLines(strings.Join(keep, "\n"), 12)
}

var (
	// numbers are what differs between two failures of the same cause: names, versions, counts.
	numbers = regexp.MustCompile(`0x[0-9a-f]+|\b[0-9]+\b`)
	// typeHeader is gomega's "<*errors.StatusError | 0xc000>: " before a value.
	typeHeader = regexp.MustCompile(`^<[^>]*>:\s*`)
	// fileLine is testing's "restmapper_test.go:151: " before a message.
	fileLine = regexp.MustCompile(`^\S+\.go:\d+:\s*`)
)

// causeKey groups failures by the first line of their message that says something (not
// gomega's "Unexpected error:" or a value's type), with numbers blanked out.
func causeKey(f failure) string {
	var said []string // the lines that say something
	for _, l := range strings.Split(f.Message, "\n") {
		t := strings.TrimSpace(fileLine.ReplaceAllString(typeHeader.ReplaceAllString(strings.TrimSpace(l), ""), ""))
		switch {
		case t == "", t == "occurred", t == "{", strings.HasPrefix(t, "Unexpected error"),
			strings.HasPrefix(t, "Expected success"), strings.HasPrefix(t, "[timedout]"):
			continue
		}
		said = append(said, t)
	}
	line := ""
	if len(said) > 0 {
		line = said[0]
	}
	if line == "Expected" {
		// a matcher's failure: "Expected 2 to equal 3", values and all
		line = strings.Join(said[:min(len(said), 4)], " ")
	}
	if len(line) > 160 {
		line = line[:160]
	}
	return numbers.ReplaceAllString(line, "N")
}

// writeSummary writes the table of results and the failures grouped by cause, largest first.
func writeSummary(w io.Writer, results []result) {
	fmt.Fprintf(w, "| package | specs passed | failed | skipped | pending | pass rate | Go tests passed/failed | API requests | seconds | note |\n")
	fmt.Fprintf(w, "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	var tp, tf, ts, tn int
	var all []failure
	for _, r := range results {
		tp, tf, ts, tn = tp+r.Passed, tf+r.Failed, ts+r.Skipped, tn+r.Pending
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %s | %d/%d | %d | %.0f | %s |\n", r.Package, r.Passed, r.Failed, r.Skipped,
			r.Pending, rate(r.Passed, r.Failed), r.GoPassed, r.GoFailed, r.Requests, r.Seconds, r.Note)
		all = append(all, r.Failures...)
	}
	fmt.Fprintf(w, "| **total** | %d | %d | %d | %d | %s | | | | |\n\n", tp, tf, ts, tn, rate(tp, tf))
	for _, r := range results {
		if r.NotRun != "" {
			fmt.Fprintf(w, "Not run in %s (not applicable to an existing cluster): %s\n\n", r.Package, r.NotRun)
		}
	}

	groups := map[string][]failure{}
	for _, f := range all {
		groups[causeKey(f)] = append(groups[causeKey(f)], f)
	}
	keys := make([]string, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if len(groups[keys[i]]) != len(groups[keys[j]]) {
			return len(groups[keys[i]]) > len(groups[keys[j]])
		}
		return keys[i] < keys[j]
	})
	fmt.Fprintf(w, "## Failures by message (%d failures, %d messages)\n\n", len(all), len(keys))
	for _, k := range keys {
		g := groups[k]
		fmt.Fprintf(w, "### %d × %s\n\n", len(g), k)
		for _, f := range g {
			where := ""
			if f.Where != "" {
				where = " (" + f.Where + ")"
			}
			fmt.Fprintf(w, "- %s: %s%s\n", f.Package, f.Name, where)
		}
		fmt.Fprintf(w, "\nfirst:\n\n```\n%s\n```\n\n", g[0].Message)
	}
}

func rate(passed, failed int) string {
	if passed+failed == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", 100*float64(passed)/float64(passed+failed))
}
