package conformance

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPathsRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
		segs []string
	}{
		{"plain", "steps.0.body.metadata.name", []string{"steps", "0", "body", "metadata", "name"}},
		{"bracketed", `body.metadata.annotations["k8s.io/initial-events-end"]`, []string{"body", "metadata", "annotations", "k8s.io/initial-events-end"}},
		{"nested quotes", `body["components.schemas[\"a.b\"]"].x`, []string{"body", `components.schemas["a.b"]`, "x"}},
		{"two brackets", `d["a.b"]["x-y.z"]`, []string{"d", "a.b", "x-y.z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			segs, err := parsePath(tc.path)
			require.NoError(t, err)
			assert.Equal(t, tc.segs, segs)
			assert.Equal(t, tc.path, formatPath(segs))
		})
	}
	for _, bad := range []string{"", ".a", "a.", "a..b", `a["b`, `a[b]`} {
		_, err := parsePath(bad)
		assert.Error(t, err, "%q", bad)
	}
}

func TestPatternCovers(t *testing.T) {
	p, err := parsePattern(`steps.*.body["resources.name=*"]`)
	require.NoError(t, err)
	assert.True(t, p.covers([]string{"steps", "3", "body", "resources.name=pods", "verbs", "0"}), "a pattern covers what is below it")
	assert.False(t, p.covers([]string{"steps", "3", "body", "groups.name=apps"}))
	assert.False(t, p.covers([]string{"steps", "3"}), "nor what is above it")
	assert.True(t, globMatch("a*b*c", "aXXbYc"))
	assert.False(t, globMatch("a*b", "ab c"))
}

func TestNormalize(t *testing.T) {
	h := http.Header{"Content-Type": {"application/json"}, "Audit-Id": {"x"}, "Warning": {`299 - "a"`}}
	r := &Run{
		Case:  Case{Steps: []Step{{Body: map[string]any{"metadata": map[string]any{"generateName": "cm-"}}}}},
		Names: map[string]string{"case-bcdfg": "{ns}"},
		Steps: []Answer{{Status: 201, Header: h, Body: []byte(`{"metadata":{"name":"cm-x7k2q","generateName":"cm-","namespace":"case-bcdfg",
			"uid":"0f1e2d3c-4b5a-4978-8695-a4b3c2d1e0f9","resourceVersion":"123","creationTimestamp":"2026-01-02T03:04:05Z"},
			"spec":{"clusterIP":"10.96.1.2","ports":[{"nodePort":31234}]},"message":"ConfigMap \"cm-x7k2q\": too old resource version: 5 (9)"}`)}},
	}
	got := Normalize(r).Steps[0]
	assert.Equal(t, map[string]any{
		"status":  float64(201),
		"headers": map[string]any{"Content-Type": "application/json", "Warning": []any{`299 - "a"`}},
		"body": map[string]any{
			"metadata": map[string]any{"name": "cm-{gen}", "generateName": "cm-", "namespace": "{ns}", "uid": "{uid}",
				"resourceVersion": "{rv}", "creationTimestamp": "{time}"},
			"spec":    map[string]any{"clusterIP": "{ip}", "ports": []any{map[string]any{"nodePort": "{port}"}}},
			"message": `ConfigMap "cm-{gen}": too old resource version: {rv}`,
		},
	}, got)
}

func TestClassifyAndStale(t *testing.T) {
	want := RecordedCase{Steps: []any{map[string]any{"status": float64(200), "body": map[string]any{"a": "1"}}}}
	got := RecordedCase{Steps: []any{map[string]any{"status": float64(200), "body": map[string]any{"a": "2", "b": "x"}}}}
	diffs := Compare(want, got)
	require.Len(t, diffs, 2)
	assert.Equal(t, "steps.0.body.a", formatPath(diffs[0].Path))
	assert.True(t, diffs[1].WantMissing, "b is opemu's only")

	lists := []*DeclaredList{{Class: ClassDefect, File: "defects.yaml", Entries: []Entry{
		{ID: "added-b", Excuses: []Excuse{{Cases: []string{"c-*"}, Only: "added", patterns: mustPatterns(t, "steps.*.body.b")}}},
		{ID: "unused", Excuses: []Excuse{{Cases: []string{"other"}, patterns: mustPatterns(t, "steps")}}},
		{ID: "etcd-only", Excuses: []Excuse{{Cases: []string{"c-1"}, Stores: []string{"etcd"}, patterns: mustPatterns(t, "steps")}}},
	}}}
	cl := NewClassifier(lists, "memory")
	assert.Equal(t, Verdict{}, cl.Classify("c-1", diffs[0]), "a changed value is not an added one")
	assert.Equal(t, Verdict{Class: ClassDefect, ID: "added-b"}, cl.Classify("c-1", diffs[1]))
	assert.Equal(t, []ExcuseRef{{File: "defects.yaml", ID: "unused", Index: 0, Case: "other"}}, cl.Stale(),
		"the excuse that excused nothing is stale; the etcd-only one does not apply to memory")
}

func mustPatterns(t *testing.T, ps ...string) []pattern {
	t.Helper()
	var out []pattern
	for _, p := range ps {
		pat, err := parsePattern(p)
		require.NoError(t, err)
		out = append(out, pat)
	}
	return out
}

func TestExpand(t *testing.T) {
	e := env{"ns": "n1", "coll": "/api/v1/namespaces/{ns}/configmaps", "obj": map[string]any{"metadata": map[string]any{"namespace": "{ns}"}},
		"rv": literal{"{not-expanded}"}}
	s, err := e.expandStep(Step{Path: "{coll}/x", Body: "{obj}", Merge: map[string]any{"metadata": map[string]any{"resourceVersion": "{rv}"}}})
	require.NoError(t, err)
	assert.Equal(t, "/api/v1/namespaces/n1/configmaps/x", s.Path)
	assert.Equal(t, map[string]any{"metadata": map[string]any{"namespace": "n1", "resourceVersion": "{not-expanded}"}}, s.Body,
		"a template's object is expanded and merged; a captured value is used as it is")
	_, err = e.expandString("{typo}")
	assert.Error(t, err, "an unknown variable is an error, never sent")
}
