package conformance

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// The corpus: cases written as data, one YAML file per area under cases/.

// File is one area's file of cases.
type File struct {
	// Authorization is the --authorization-mode the file's cases need: "RBAC" records them from
	// a kube-apiserver started with it (KAS_AUTHZ=RBAC) and replays them against opemu with
	// AUTHORIZATION_MODE=RBAC; empty is AlwaysAllow.
	Authorization string `json:"authorization,omitempty"`
	// Fixtures are requests made once per server before any case (the corpus's own CRDs):
	// their answers are not compared, and a 409 (already there, from an earlier recording)
	// is fine. A fixture with Until is repeated until it answers that status (a CRD served).
	Fixtures []Step `json:"fixtures,omitempty"`
	// Templates are setup and steps that cases of the file share, filled in with each case's
	// Vars.
	Templates map[string]Template `json:"templates,omitempty"`
	// Cases are the file's cases, run in any order and in parallel.
	Cases []Case `json:"cases,omitempty"`
	// Matrix makes more cases: each row's templates, each a case named <row name>-<template>
	// with the row's Vars.
	Matrix []Row `json:"matrix,omitempty"`
}

// Row is one line of a file's Matrix: the same templates for another kind.
type Row struct {
	// Name prefixes the cases' names.
	Name string `json:"name"`
	// Doc is every case's Doc.
	Doc string `json:"doc,omitempty"`
	// Vars are the cases' variables.
	Vars map[string]any `json:"vars"`
	// Templates are the templates of the file to make cases of.
	Templates []string `json:"templates"`
	// Namespaces are the cases' namespace variables (as Case.Namespaces).
	Namespaces []string `json:"namespaces,omitempty"`
}

// Template is setup and steps a case takes by naming it (Case.Template).
type Template struct {
	Setup []Step `json:"setup,omitempty"`
	Steps []Step `json:"steps"`
}

// Case is one request or a short sequence of them. Each case runs in namespaces of its own
// (created before its setup), so that cases are independent: cluster-scoped objects a case
// creates carry {ns} in their names, and cluster-wide lists select by a label of {ns}.
type Case struct {
	// Name is unique in the corpus: a DNS label.
	Name string `json:"name"`
	// Doc says what the case checks, when its name does not.
	Doc string `json:"doc,omitempty"`
	// Namespaces are the variables naming the case's namespaces, each created before setup with
	// a name unique to the run. Unset means ["ns"]; [] means none.
	Namespaces []string `json:"namespaces,omitempty"`
	// Vars are values substituted for {name} in the steps (whole YAML values when a string is
	// just "{name}").
	Vars map[string]any `json:"vars,omitempty"`
	// Template names a template of the file: its setup runs before Setup, its steps before
	// Steps.
	Template string `json:"template,omitempty"`
	// Setup are requests whose answers are not compared (only their status codes).
	Setup []Step `json:"setup,omitempty"`
	// Steps are the compared requests.
	Steps []Step `json:"steps"`

	// Area is the file the case comes from (its base name without .yaml).
	Area string `json:"-"`
	// Authorization is its file's.
	Authorization string `json:"-"`
}

// Step is one request.
type Step struct {
	// Method is the HTTP method; empty means GET.
	Method string `json:"method,omitempty"`
	// Path is the request path, with {variables}.
	Path string `json:"path"`
	// Query parameters (a map of strings), with {variables}; sent in key order. A template may
	// take the whole map from a variable: query: "{q}".
	Query any `json:"query,omitempty"`
	// Headers to send (Content-Type, Accept, ...). Content-Type defaults to application/json
	// when there is a body.
	Headers map[string]string `json:"headers,omitempty"`
	// Body is sent as JSON (a JSON Patch is a list); BodyText is sent as it is (YAML, broken
	// JSON). At most one of them.
	Body     any    `json:"body,omitempty"`
	BodyText string `json:"bodyText,omitempty"`
	// Merge is a JSON merge patch (RFC 7386) applied to Body before it is sent: a template's
	// object with a resourceVersion, a label, a field of the wrong type.
	Merge any `json:"merge,omitempty"`
	// Watch reads the answer as a stream of watch events.
	Watch *Watch `json:"watch,omitempty"`
	// Capture sets variables for later steps from this answer, before normalisation: name →
	// path into the answer (body.metadata.resourceVersion, events.0.object.metadata.name).
	Capture map[string]string `json:"capture,omitempty"`
	// Until repeats the request (every 50 ms, up to 30 s) until it answers this status: a CRD
	// served, an object gone. Only in setup and fixtures.
	Until int `json:"until,omitempty"`
	// Select keeps only these paths of the body (a huge document's parts that matter): the
	// body becomes a map of path → value. A path may name the case's namespaces ({ns}).
	Select []string `json:"select,omitempty"`
	// Ignore are paths of the answer (body.spec.ports.0.targetPort) whose values are run-specific
	// in a way the normalisation cannot know: both answers show "{ignored}" there.
	Ignore []string `json:"ignore,omitempty"`
	// Unordered are paths of lists in the answer (body.status.resourceRules) whose order the
	// server does not fix (kube-apiserver lists a rules review's rules in its informer's map
	// order): both answers' lists are sorted by their JSON.
	Unordered []string `json:"unordered,omitempty"`
}

// Watch says how much of a watch to read.
type Watch struct {
	// Events is how many events to read before closing the stream; 0 reads until the server
	// ends it (bound it with timeoutSeconds).
	Events int `json:"events,omitempty"`
	// During are requests made once the watch's headers came back (so the watch is
	// established), before its events are read. Their answers are not compared.
	During []Step `json:"during,omitempty"`
	// Seconds bounds the read on the client's side (default: timeoutSeconds + 2, else 5).
	Seconds int `json:"seconds,omitempty"`
	// Unordered compares the events as a set: kube-apiserver sends the initial events of a
	// watch across namespaces in no fixed order.
	Unordered bool `json:"unordered,omitempty"`
}

// Corpus is every case and fixture of a directory of case files.
type Corpus struct {
	Fixtures []Step
	Cases    []Case
}

var caseNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// LoadCorpus reads every *.yaml file of dir. Templates are expanded; every case name must be a
// DNS label unique in the corpus.
func LoadCorpus(dir string) (*Corpus, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("conformance: no case files in %s", dir)
	}
	sort.Strings(files)
	c := &Corpus{}
	seen := map[string]string{}
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		var f File
		if err := yaml.UnmarshalStrict(raw, &f); err != nil {
			return nil, fmt.Errorf("conformance: %s: %w", path, err)
		}
		area := strings.TrimSuffix(filepath.Base(path), ".yaml")
		c.Fixtures = append(c.Fixtures, f.Fixtures...)
		cases := f.Cases
		for _, row := range f.Matrix {
			for _, tpl := range row.Templates {
				cases = append(cases, Case{Name: row.Name + "-" + tpl, Doc: row.Doc, Vars: row.Vars, Template: tpl, Namespaces: row.Namespaces})
			}
		}
		for _, k := range cases {
			if !caseNameRE.MatchString(k.Name) || len(k.Name) > 63 {
				return nil, fmt.Errorf("conformance: %s: case name %q is not a DNS label", path, k.Name)
			}
			if other, dup := seen[k.Name]; dup {
				return nil, fmt.Errorf("conformance: case %q is in %s and in %s", k.Name, other, area)
			}
			seen[k.Name] = area
			k.Area, k.Authorization = area, f.Authorization
			if k.Template != "" {
				tpl, ok := f.Templates[k.Template]
				if !ok {
					return nil, fmt.Errorf("conformance: %s: case %q: no template %q", path, k.Name, k.Template)
				}
				k.Setup = append(slices.Clone(tpl.Setup), k.Setup...)
				k.Steps = append(slices.Clone(tpl.Steps), k.Steps...)
			}
			if k.Namespaces == nil {
				k.Namespaces = []string{"ns"}
			}
			if len(k.Steps) == 0 {
				return nil, fmt.Errorf("conformance: %s: case %q has no steps", path, k.Name)
			}
			c.Cases = append(c.Cases, k)
		}
	}
	return c, nil
}

// ByAuthorization splits cases by the authorization mode they need ("" or "RBAC").
func ByAuthorization(cases []Case) map[string][]Case {
	out := map[string][]Case{}
	for _, k := range cases {
		out[k.Authorization] = append(out[k.Authorization], k)
	}
	return out
}

// Select returns the cases whose names match one of the comma-separated glob patterns
// (path.Match syntax; "" is all).
func (c *Corpus) Select(patterns string) ([]Case, error) {
	if patterns == "" {
		return c.Cases, nil
	}
	var out []Case
	for _, k := range c.Cases {
		for _, p := range strings.Split(patterns, ",") {
			ok, err := filepath.Match(strings.TrimSpace(p), k.Name)
			if err != nil {
				return nil, fmt.Errorf("conformance: case pattern %q: %w", p, err)
			}
			if ok {
				out = append(out, k)
				break
			}
		}
	}
	return out, nil
}
