package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A ginkgo report counts It nodes by state; a failed BeforeSuite is a failure but not a spec.
func TestReadGinkgo(t *testing.T) {
	report := `[{"SuiteDescription":"Client Suite","SpecReports":[
	 {"LeafNodeType":"BeforeSuite","State":"failed","Failure":{"Message":"no kubeconfig"}},
	 {"ContainerHierarchyTexts":["Client","Get"],"LeafNodeType":"It","LeafNodeText":"gets a Node","State":"failed",
	  "Failure":{"Message":"Unexpected error:\n    nodes \"n\" not found","Location":{"FileName":"/tmp/x/controller-runtime@v0.25.2/pkg/client/client_test.go","LineNumber":42}}},
	 {"LeafNodeType":"It","LeafNodeText":"lists","State":"passed"},
	 {"LeafNodeType":"It","LeafNodeText":"watches","State":"timedout","Failure":{"Message":"hung"}},
	 {"LeafNodeType":"It","LeafNodeText":"pending","State":"pending"},
	 {"LeafNodeType":"It","LeafNodeText":"skipped","State":"skipped"}]}]`
	path := filepath.Join(t.TempDir(), "r.json")
	require.NoError(t, os.WriteFile(path, []byte(report), 0o600))
	r := result{Package: "pkg/client"}
	require.NoError(t, readGinkgo(path, &r))
	assert.Equal(t, [4]int{1, 2, 1, 1}, [4]int{r.Passed, r.Failed, r.Skipped, r.Pending})
	require.Len(t, r.Failures, 3)
	assert.Equal(t, "[BeforeSuite]", r.Failures[0].Name)
	assert.Equal(t, "Client Get gets a Node", r.Failures[1].Name)
	assert.Equal(t, "pkg/client/client_test.go:42", r.Failures[1].Where)
	assert.Equal(t, `nodes "n" not found`, causeKey(r.Failures[1]))
	assert.Equal(t, "[timedout] hung", r.Failures[2].Message)
}

// Plain Go tests are counted from go test -json, except the one that runs the ginkgo suite.
func TestReadGoTests(t *testing.T) {
	stream := strings.Join([]string{
		`{"Action":"run","Test":"TestSuite"}`,
		`{"Action":"output","Test":"TestSuite","Output":"Running Suite: Client Suite\n"}`,
		`{"Action":"fail","Test":"TestSuite"}`,
		`{"Action":"pass","Test":"TestMapper/sub"}`,
		`{"Action":"pass","Test":"TestMapper/other"}`,
		`{"Action":"pass","Test":"TestMapper"}`,
		`{"Action":"output","Test":"TestLazy","Output":"lazy_test.go:9: boom\n"}`,
		`{"Action":"fail","Test":"TestLazy"}`,
		`# a build error, not JSON`,
	}, "\n")
	r := result{Package: "pkg/client/apiutil"}
	var log bytes.Buffer
	require.NoError(t, readGoTests(strings.NewReader(stream), &r, &log))
	assert.Equal(t, [2]int{2, 1}, [2]int{r.GoPassed, r.GoFailed}, "leaves: TestMapper/sub, TestMapper/other, TestLazy")
	require.Len(t, r.Failures, 1)
	assert.Equal(t, "TestLazy", r.Failures[0].Name)
	assert.Contains(t, r.Failures[0].Message, "boom")
	assert.Contains(t, log.String(), "a build error")
}

// Failures group by what their message says, not by gomega's framing of it.
func TestCauseKey(t *testing.T) {
	for msg, want := range map[string]string{
		"restmapper_test.go:151: \n        Unexpected error:\n            <*meta.NoResourceMatchError | 0x18a14d0fb890>: \n            no matches for authentication.k8s.io/v1, Resource=tokenreviews": "no matches for authentication.k8s.io/v1, Resource=tokenreviews",
		"Expected success, but got an error:\n    <*errors.StatusError | 0x263919711900>: \n    the server could not find the requested resource\n    {":                                               "the server could not find the requested resource",
		"Expected\n    <string>: the body of the request was in an unknown format\nto contain substring\n    <string>: field not declared in schema":                                                   "Expected the body of the request was in an unknown format to contain substring field not declared in schema",
		"restmapper_test.go:131: \n        Expected\n            <int>: 2\n        to equal\n            <int>: 3":                                                                                     "Expected N to equal N",
	} {
		assert.Equal(t, want, causeKey(failure{Message: msg}))
	}
}

// The summary totals the packages and lists the largest group of failures first.
func TestWriteSummary(t *testing.T) {
	results := []result{
		{Package: "pkg/client", Passed: 3, Failed: 3, Failures: []failure{
			{Package: "pkg/client", Name: "a", Message: "the server could not find the requested resource", Where: "pkg/client/x_test.go:1"},
			{Package: "pkg/client", Name: "b", Message: "Unexpected error:\n    <*errors.StatusError | 0xc0>: \n    the server could not find the requested resource"},
			{Package: "pkg/client", Name: "c", Message: "415"},
		}},
		{Package: "pkg/cache", Passed: 5, Pending: 1},
	}
	var b bytes.Buffer
	writeSummary(&b, results)
	out := b.String()
	assert.Contains(t, out, "| **total** | 8 | 3 | 0 | 1 | 72.7% |")
	assert.Contains(t, out, "- pkg/client: a (pkg/client/x_test.go:1)\n- pkg/client: b\n")
	assert.Less(t, strings.Index(out, "### 2 × the server could not find"), strings.Index(out, "### 1 × N"))
}
