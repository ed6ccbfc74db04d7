package conformance

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Recordings: kube-apiserver's normalised answers, one file per area under recorded/, written
// by the recorder (go run ./test/conformance/record) and never by hand.

// RecordedFile is one area's recordings.
type RecordedFile struct {
	// Server is the version of kube-apiserver the answers came from.
	Server string `json:"server"`
	// Cases are the answers by case name.
	Cases map[string]RecordedCase `json:"cases"`
}

// RecordedCase is one case's normalised answers.
type RecordedCase struct {
	// Setup are the setup steps' status codes.
	Setup []int `json:"setup,omitempty"`
	// Steps are the compared steps' answers: status, headers, body, events.
	Steps []any `json:"steps"`
}

// header is the comment at the top of every recorded file.
const recordedHeader = "# Recorded from kube-apiserver by `go run ./test/conformance/record` (see doc.go): do not edit.\n"

// LoadRecorded reads every recorded file of dir: case name → its answers, and the server each
// file names.
func LoadRecorded(dir string) (map[string]RecordedCase, map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, nil, err
	}
	cases := map[string]RecordedCase{}
	servers := map[string]string{}
	for _, path := range files {
		f, err := readRecordedFile(path)
		if err != nil {
			return nil, nil, err
		}
		servers[strings.TrimSuffix(filepath.Base(path), ".yaml")] = f.Server
		for name, rc := range f.Cases {
			cases[name] = rc
		}
	}
	return cases, servers, nil
}

func readRecordedFile(path string) (*RecordedFile, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	// Through JSON, so that numbers and strings decode as an answer's do.
	j, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("conformance: %s: %w", path, err)
	}
	var f RecordedFile
	if err := json.Unmarshal(j, &f); err != nil {
		return nil, fmt.Errorf("conformance: %s: %w", path, err)
	}
	if f.Cases == nil {
		f.Cases = map[string]RecordedCase{}
	}
	return &f, nil
}

// WriteRecorded writes the answers of cases (by area) into dir, keeping the recordings of the
// area's other cases that are still in the corpus (a recording of some cases replaces only
// theirs) and dropping those of cases that are gone.
func WriteRecorded(dir, server string, corpus *Corpus, answers map[string]RecordedCase) error {
	byArea := map[string][]string{}
	for _, c := range corpus.Cases {
		byArea[c.Area] = append(byArea[c.Area], c.Name)
	}
	areas := make([]string, 0, len(byArea))
	for a := range byArea {
		areas = append(areas, a)
	}
	sort.Strings(areas)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, area := range areas {
		path := filepath.Join(dir, area+".yaml")
		old := &RecordedFile{Cases: map[string]RecordedCase{}}
		if _, err := os.Stat(path); err == nil {
			if old, err = readRecordedFile(path); err != nil {
				return err
			}
		}
		f := RecordedFile{Server: server, Cases: map[string]RecordedCase{}}
		touched := false
		for _, name := range byArea[area] {
			if rc, ok := answers[name]; ok {
				f.Cases[name] = rc
				touched = true
			} else if rc, ok := old.Cases[name]; ok {
				f.Cases[name] = rc
			}
		}
		if !touched {
			continue
		}
		b, err := yaml.Marshal(f)
		if err != nil {
			return err
		}
		if err := os.WriteFile(path, append([]byte(recordedHeader), b...), 0o644); err != nil {
			return err
		}
	}
	return nil
}
