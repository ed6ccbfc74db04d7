package server_test

import (
	"bufio"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kubeWatchLines opens a Kubernetes watch (the query must bound it with timeoutSeconds) and
// returns its status code and the event types it sent, BOOKMARKs marked with their
// initial-events-end annotation.
func (e *env) kubeWatchLines(path string) (int, []string) {
	e.t.Helper()
	resp, err := e.http.Client().Get(e.http.URL + path)
	require.NoError(e.t, err)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil
	}
	var types []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var ev struct {
			Type   string `json:"type"`
			Object struct {
				Metadata struct {
					Annotations map[string]string `json:"annotations"`
				} `json:"metadata"`
			} `json:"object"`
		}
		require.NoError(e.t, json.Unmarshal(sc.Bytes(), &ev), "line: %s", sc.Text())
		if ev.Object.Metadata.Annotations["k8s.io/initial-events-end"] == "true" {
			ev.Type += "(initial-events-end)"
		}
		types = append(types, ev.Type)
	}
	return resp.StatusCode, types
}

// TestBooleanQueryParameters: every boolean flag takes strconv.ParseBool's spellings (the
// Python client sends watch=True) and refuses anything else with a 400 naming the parameter.
func TestBooleanQueryParameters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app("web", 1, "nginx:1.27")).code)

	t.Run("watch", func(t *testing.T) {
		for _, v := range []string{"true", "True", "TRUE", "t", "T", "1"} {
			code, types := e.kubeWatchLines(appsPath + "?watch=" + v + "&timeoutSeconds=1")
			require.Equal(t, http.StatusOK, code, "watch=%s", v)
			assert.Equal(t, []string{"ADDED"}, types, "watch=%s is a watch", v)
		}
		for _, v := range []string{"false", "False", "FALSE", "f", "F", "0"} {
			r := e.do("GET", appsPath+"?watch="+v, "", "")
			require.Equal(t, http.StatusOK, r.code)
			assert.Equal(t, "ApplicationList", r.json(t)["kind"], "watch=%s is a list", v)
		}
	})
	t.Run("allowWatchBookmarks and sendInitialEvents", func(t *testing.T) {
		q := "?watch=1&sendInitialEvents=True&allowWatchBookmarks=T&resourceVersionMatch=NotOlderThan&timeoutSeconds=1"
		code, types := e.kubeWatchLines(appsPath + q)
		require.Equal(t, http.StatusOK, code)
		require.NotEmpty(t, types)
		assert.Equal(t, []string{"ADDED", "BOOKMARK(initial-events-end)"}, types[:2])
		// Without bookmarks allowed, none is sent.
		_, types = e.kubeWatchLines(appsPath + "?watch=1&sendInitialEvents=True&allowWatchBookmarks=False&resourceVersionMatch=NotOlderThan&timeoutSeconds=1")
		assert.Equal(t, []string{"ADDED"}, types)
	})
	t.Run("force", func(t *testing.T) {
		path := appsPath + "/applied"
		require.Equal(t, http.StatusCreated, e.do("PATCH", path+"?fieldManager=alice", applyType, strings.ReplaceAll(applied, "name: web", "name: applied")).code)
		require.Equal(t, http.StatusOK, e.do("PATCH", path+"?fieldManager=bob", "application/merge-patch+json", `{"spec":{"replicas":7}}`).code)
		r := e.do("PATCH", path+"?fieldManager=alice&force=True", applyType, strings.ReplaceAll(applied, "name: web", "name: applied"))
		require.Equal(t, http.StatusOK, r.code, "force=True takes the field back: %s", r.body)
		assert.EqualValues(t, 3, field(r.json(t), "spec", "replicas"))
	})
	t.Run("SSE initial", func(t *testing.T) {
		c := e.watch("?initial=True", nil)
		ev, _ := c.event()
		assert.Equal(t, "ADDED", ev.Type)
	})

	runStatusCases(t, e, []statusCase{
		{name: "watch=yes", method: "GET", path: appsPath + "?watch=yes", code: 400, reason: "BadRequest", message: `"watch"`},
		{name: "watch without a value", method: "GET", path: appsPath + "?watch=", code: 400, reason: "BadRequest", message: `"watch"`},
		{name: "allowWatchBookmarks=on", method: "GET", path: appsPath + "?watch=true&allowWatchBookmarks=on", code: 400, reason: "BadRequest", message: `"allowWatchBookmarks"`},
		{name: "sendInitialEvents=y", method: "GET", path: appsPath + "?watch=true&sendInitialEvents=y&resourceVersionMatch=NotOlderThan", code: 400, reason: "BadRequest", message: `"sendInitialEvents"`},
		{name: "force=yes", method: "PATCH", path: appsPath + "/web?fieldManager=a&force=yes", ctype: applyType, body: applied, code: 400, reason: "BadRequest", message: `"force"`},
		{name: "SSE initial=yes", method: "GET", path: "/watch?initial=yes", code: 400, reason: "BadRequest", message: `"initial"`},
	})
}
