package conformance

import (
	"encoding/json"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Normalisation: what is specific to one run (uids, resourceVersions, timestamps, generated
// names, namespaces' names, IPs, ports, hashes) is replaced by a placeholder, the same way for
// kube-apiserver's answers and opemu's, so that what is left can be compared.

// comparedHeaders are the response headers compared; the others (Audit-Id, Date, priority and
// fairness uids, Cache-Control) say nothing about the API.
var comparedHeaders = []string{"Content-Type", "Warning", "Retry-After"}

// tree is the answer as one JSON value: status, the compared headers, the body (decoded JSON,
// YAML as JSON, "{protobuf}" for a protobuf body, other text as a string) and a watch's events.
func (a Answer) tree() map[string]any {
	t := map[string]any{"status": float64(a.Status)}
	h := map[string]any{}
	for _, name := range comparedHeaders {
		vs := a.Header.Values(name)
		switch {
		case len(vs) == 0:
		case name == "Warning":
			list := make([]any, len(vs))
			for i, v := range vs {
				list[i] = v
			}
			h[name] = list
		default:
			h[name] = strings.Join(vs, ", ")
		}
	}
	if len(h) > 0 {
		t["headers"] = h
	}
	if len(a.Body) > 0 {
		t["body"] = decodeBody(a.Header.Get("Content-Type"), a.Body)
	}
	if a.Events != nil {
		evs := make([]any, 0, len(a.Events))
		for _, ev := range a.Events {
			if v := decodeBody("application/json", ev); !periodicBookmark(v) {
				evs = append(evs, v)
			}
		}
		t["events"] = evs
	}
	return t
}

// periodicBookmark reports whether a watch event is a BOOKMARK other than the one that ends
// the initial events: kube-apiserver sends those when its timers say (one may come just before
// a timeoutSeconds ends the watch, or not), so neither answer's are compared.
func periodicBookmark(ev any) bool {
	m, _ := ev.(map[string]any)
	if m["type"] != "BOOKMARK" {
		return false
	}
	obj, _ := m["object"].(map[string]any)
	md, _ := obj["metadata"].(map[string]any)
	ann, _ := md["annotations"].(map[string]any)
	return ann["k8s.io/initial-events-end"] != "true"
}

// decodeBody decodes a body by its content type.
func decodeBody(contentType string, b []byte) any {
	switch {
	case strings.Contains(contentType, "protobuf"):
		return "{protobuf}"
	case strings.Contains(contentType, "yaml"):
		if j, err := yaml.YAMLToJSON(b); err == nil {
			var v any
			if json.Unmarshal(j, &v) == nil {
				return v
			}
		}
	default:
		var v any
		if json.Unmarshal(b, &v) == nil {
			return v
		}
	}
	return string(b)
}

var (
	uidRE  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
	ipRE   = regexp.MustCompile(`\b\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}\b`)
	ipPort = regexp.MustCompile(`\{ip\}:\d+`)
	hashRE = regexp.MustCompile(`hash=[0-9A-Fa-f]+`)
	// An object a message quotes as a Go string of its JSON (kube-apiserver's 422 for a patch
	// whose result it cannot decode): its members come in the order of the server's encoding
	// and carry what each server keeps (managedFields, generation), compared elsewhere.
	quotedObjectRE = regexp.MustCompile(`(Invalid value: )"\{\\"(?:[^"\\]|\\.)*\}"`)
	// resourceVersions inside messages: "too old resource version: 5 (7)", "current: 9", "the
	// ResourceVersion in record (9)", "ResourceVersion in object meta: 9", an object quoted in a
	// message as escaped JSON, "object not decodable revision=9" (a failed conversion).
	rvInMsg = []*regexp.Regexp{
		regexp.MustCompile(`(too old resource version: )\d+ \(\d+\)`),
		regexp.MustCompile(`((?i)resource ?version:? ?"?)\d+`),
		regexp.MustCompile(`((?i)resourceVersion in (?:record|the precondition) \()\d+`),
		regexp.MustCompile(`((?i)resourceVersion in (?:precondition|object meta): )\d+`),
		regexp.MustCompile(`(resourceVersion\\?":\\?")\d+`),
		regexp.MustCompile(`(Too large resource version: \{rv\}, current: )\d+`),
		regexp.MustCompile(`(not decodable revision=)\d+`),
	}
)

// normalizer rewrites one case's answers.
type normalizer struct {
	// names are run-specific strings → placeholders, longest first (a namespace's name,
	// a generated name), replaced wherever they occur in a string.
	names [][2]string
	// generated match a name generated from a generateName the case sent (in a message about
	// an object that was never stored: "ConfigMap \"bad-x7k2q\" is invalid").
	generated []*regexp.Regexp
}

// newNormalizer knows the run's namespaces, the names the server generated in any of its
// answers (an object with generateName G and name N = G + suffix: N becomes G + "{gen}") and
// the generateNames the case sent.
func newNormalizer(names map[string]string, trees []map[string]any, sent []any) *normalizer {
	all := map[string]string{}
	for k, v := range names {
		all[k] = v
	}
	for _, t := range trees {
		eachMap(t, func(m map[string]any) {
			g, _ := m["generateName"].(string)
			n, _ := m["name"].(string)
			if p := generatedPrefix(g); p != "" && len(n) == len(p)+5 && strings.HasPrefix(n, p) {
				all[n] = p + "{gen}"
			}
		})
	}
	n := &normalizer{}
	prefixes := map[string]bool{}
	for _, b := range sent {
		eachMap(b, func(m map[string]any) {
			if g := generatedPrefix(stringOf(m["generateName"])); g != "" && !prefixes[g] {
				prefixes[g] = true
				n.generated = append(n.generated, regexp.MustCompile(`(`+regexp.QuoteMeta(g)+`)[a-z0-9]{5}\b`))
			}
		})
	}
	for k, v := range all {
		n.names = append(n.names, [2]string{k, v})
	}
	sort.Slice(n.names, func(i, j int) bool {
		if len(n.names[i][0]) != len(n.names[j][0]) {
			return len(n.names[i][0]) > len(n.names[j][0])
		}
		return n.names[i][0] < n.names[j][0]
	})
	return n
}

// eachMap calls fn with every object (JSON map) in v, v itself included.
func eachMap(v any, fn func(map[string]any)) {
	switch v := v.(type) {
	case map[string]any:
		fn(v)
		for _, x := range v {
			eachMap(x, fn)
		}
	case []any:
		for _, x := range v {
			eachMap(x, fn)
		}
	}
}

// generatedPrefix is what a name generated from generateName g starts with: g, cut to 58
// characters (apiserver's names.SimpleNameGenerator leaves room for its 5 random ones).
func generatedPrefix(g string) string {
	return g[:min(len(g), 58)]
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}

// value normalises a decoded JSON value; key is the member name it is the value of.
func (n *normalizer) value(key string, v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			out[n.text(k)] = n.value(k, x)
		}
		switch v["kind"] {
		case "Table":
			normalizeTable(out)
		case "Status":
			sortCauses(out)
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = n.value("", x)
		}
		if key == "managedFields" || strings.HasSuffix(key, ".managedFields") { // a step's select names it by path
			sortManagedFields(out)
		}
		return out
	case string:
		switch {
		case v == "":
			return v
		case key == "resourceVersion":
			return "{rv}"
		case key == "continue":
			return "{continue}"
		case key == "storageVersionHash":
			// A hash of the group, version and kind: a case's own CRD group is per run.
			return "{hash}"
		}
		return n.text(v)
	case float64:
		if key == "nodePort" || key == "healthCheckNodePort" {
			return "{port}"
		}
	}
	return v
}

// text normalises a string (a value, a member name, a message).
func (n *normalizer) text(s string) string {
	for _, p := range n.names {
		s = strings.ReplaceAll(s, p[0], p[1])
	}
	s = uidRE.ReplaceAllString(s, "{uid}")
	s = timeRE.ReplaceAllString(s, "{time}")
	s = ipRE.ReplaceAllString(s, "{ip}")
	s = ipPort.ReplaceAllString(s, "{ip}:{port}")
	s = hashRE.ReplaceAllString(s, "hash={hash}")
	s = quotedObjectRE.ReplaceAllString(s, `${1}"{object}"`)
	for _, re := range rvInMsg {
		s = re.ReplaceAllString(s, "${1}{rv}")
	}
	for _, re := range n.generated {
		s = re.ReplaceAllString(s, "${1}{gen}")
	}
	return s
}

// sortManagedFields puts managedFields entries in order of operation, manager, subresource and
// apiVersion: servers order them by time to the second first, so two writes of a case in the
// same second or not come in either order.
func sortManagedFields(entries []any) {
	key := func(e any) string {
		m, _ := e.(map[string]any)
		return stringOf(m["operation"]) + "\x00" + stringOf(m["manager"]) + "\x00" + stringOf(m["subresource"]) + "\x00" + stringOf(m["apiVersion"])
	}
	sort.SliceStable(entries, func(i, j int) bool { return key(entries[i]) < key(entries[j]) })
}

// normalizeTable replaces the cells of a Table's Age column (how long ago the object was made,
// by the server's clock) with "{age}".
func normalizeTable(t map[string]any) {
	cols, _ := t["columnDefinitions"].([]any)
	var age []int
	for i, c := range cols {
		if c, ok := c.(map[string]any); ok && c["name"] == "Age" {
			age = append(age, i)
		}
	}
	rows, _ := t["rows"].([]any)
	for _, r := range rows {
		r, ok := r.(map[string]any)
		if !ok {
			continue
		}
		cells, _ := r["cells"].([]any)
		for _, i := range age {
			if i < len(cells) {
				cells[i] = "{age}"
			}
		}
	}
}

// sortCauses puts a Status's causes in order (field, reason, message) and its message's list of
// them ("X is invalid: [a, b]") in the same order: kube-apiserver reports a custom resource's
// schema errors in an order that changes from run to run.
func sortCauses(st map[string]any) {
	details, _ := st["details"].(map[string]any)
	causes, _ := details["causes"].([]any)
	if len(causes) < 2 {
		return
	}
	items := make([]string, len(causes))
	key := func(c any) string {
		m, _ := c.(map[string]any)
		return stringOf(m["field"]) + "\x00" + stringOf(m["reason"]) + "\x00" + stringOf(m["message"])
	}
	sort.SliceStable(causes, func(i, j int) bool { return key(causes[i]) < key(causes[j]) })
	for i, c := range causes {
		m, _ := c.(map[string]any)
		items[i] = stringOf(m["message"])
		if f := stringOf(m["field"]); f != "" {
			items[i] = f + ": " + items[i]
		}
	}
	msg := stringOf(st["message"])
	open := strings.Index(msg, "is invalid: [")
	if open < 0 || !strings.HasSuffix(msg, "]") {
		return
	}
	open += len("is invalid: [")
	list := msg[open : len(msg)-1]
	total := 2 * (len(items) - 1)
	for _, it := range items {
		if !strings.Contains(list, it) {
			return // the message is not the list of the causes: leave it
		}
		total += len(it)
	}
	if total == len(list) {
		st["message"] = msg[:open] + strings.Join(items, ", ") + "]"
	}
}

// Normalize returns a run's answers as recorded: for each step its normalised tree, with the
// step's Select, Ignore and Unordered applied.
func Normalize(r *Run) RecordedCase {
	trees := make([]map[string]any, len(r.Steps))
	for i, a := range r.Steps {
		trees[i] = a.tree()
	}
	var sent []any
	for _, s := range r.Case.Steps {
		sent = append(sent, s.Body)
	}
	n := newNormalizer(r.Names, trees, sent)
	rc := RecordedCase{Steps: make([]any, len(trees))}
	for _, a := range r.Setup {
		rc.Setup = append(rc.Setup, a.Status)
	}
	for i, t := range trees {
		var s Step
		if i < len(r.Case.Steps) {
			s = r.Case.Steps[i]
		}
		if len(s.Select) > 0 {
			if body, ok := t["body"]; ok {
				t["body"] = selectPaths(body, s.Select, r.Names)
			}
		}
		if s.Watch != nil && s.Watch.Unordered {
			if evs, ok := t["events"].([]any); ok {
				sort.SliceStable(evs, func(i, j int) bool { return canonicalString(evs[i]) < canonicalString(evs[j]) })
			}
		}
		out := n.value("", t).(map[string]any)
		for _, p := range s.Ignore {
			ignorePath(out, p)
		}
		for _, p := range s.Unordered {
			if list, ok := lookup(out, p); ok {
				if items, ok := list.([]any); ok {
					sort.SliceStable(items, func(i, j int) bool { return canonicalString(items[i]) < canonicalString(items[j]) })
				}
			}
		}
		rc.Steps[i] = canonical(out)
	}
	return rc
}

// selectPaths keeps the given paths of a body: path → value, "{absent}" where there is none. A
// path may name the run's namespaces by their variables ({ns}); names maps each run-specific
// name to its variable.
func selectPaths(body any, paths []string, names map[string]string) map[string]any {
	out := make(map[string]any, len(paths))
	for _, p := range paths {
		real := p
		for name, v := range names {
			real = strings.ReplaceAll(real, v, name)
		}
		if v, ok := lookup(body, real); ok {
			out[p] = v
		} else {
			out[p] = "{absent}"
		}
	}
	return out
}

// ignorePath sets the value at path p of tree to "{ignored}" when there is one.
func ignorePath(tree map[string]any, p string) {
	segs, err := parsePath(p)
	if err != nil {
		return
	}
	var cur any = tree
	for i, s := range segs {
		last := i == len(segs)-1
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[s]
			if !ok {
				return
			}
			if last {
				c[s] = "{ignored}"
				return
			}
			cur = v
		case []any:
			var idx int
			if err := json.Unmarshal([]byte(s), &idx); err != nil || idx < 0 || idx >= len(c) {
				return
			}
			if last {
				c[idx] = "{ignored}"
				return
			}
			cur = c[idx]
		default:
			return
		}
	}
}

// canonicalString is v's JSON encoding (maps in key order).
func canonicalString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// canonical round-trips v through JSON, so that answers and recordings compare alike.
func canonical(v any) any {
	b, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	_ = json.Unmarshal(b, &out)
	return out
}
