package e2e

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/opemu/opemu/test/internal/request"
)

// TestEtcdSnapshot: with STORE=etcd, `opemu snapshot save` through one replica, changes, and
// `opemu snapshot restore` through the other: both replicas serve the saved state (uids
// included, a custom resource with its CRD), at versions after every earlier one, and a watch
// from before the restore is expired on the replica that did not restore.
func TestEtcdSnapshot(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	r1, r2 := etcdReplica(t, "snap-1", e, "/snap", "ROLLOUT_STEP=0"), etcdReplica(t, "snap-2", e, "/snap", "ROLLOUT_STEP=0")
	code, app := request.JSON(t, "POST", r1.url(appsPath), appBody("kept", 1))
	require.Equal(t, http.StatusCreated, code)
	code, _ = request.JSON(t, "POST", r1.url("/apis/apiextensions.k8s.io/v1/customresourcedefinitions"), widgetCRD)
	require.Equal(t, http.StatusCreated, code)
	var widget map[string]any
	require.Eventually(t, func() bool {
		code, widget = request.JSON(t, "POST", r1.url(widgetsPath), widgetBody("w", 1))
		return code == http.StatusCreated
	}, 10*time.Second, 20*time.Millisecond, "the Widget kind is served")
	uid := func(o map[string]any) any { return o["metadata"].(map[string]any)["uid"] }

	file := filepath.Join(t.TempDir(), "state.yaml")
	out, err := exec.Command(binary, "snapshot", "save", "--server", r1.url(""), file).CombinedOutput()
	require.NoError(t, err, "%s", out)

	code, _ = request.JSON(t, "DELETE", r2.url(widgetsPath+"/w"), "")
	require.Equal(t, http.StatusOK, code)
	code, _ = request.JSON(t, "POST", r2.url(appsPath), appBody("later", 1))
	require.Equal(t, http.StatusCreated, code)
	code, list := request.JSON(t, "GET", r1.url(appsPath), "")
	require.Equal(t, http.StatusOK, code)
	before := list["metadata"].(map[string]any)["resourceVersion"].(string)

	out, err = exec.Command(binary, "snapshot", "restore", "--server", r2.url(""), file).CombinedOutput()
	require.NoError(t, err, "%s", out)
	assert.Regexp(t, `^restored: \d+ objects at resourceVersion \d+, clock `, string(out))

	for _, r := range []*replica{r1, r2} {
		eventually(t, true, func() bool {
			code, kept := request.JSON(t, "GET", r.url(appsPath+"/kept"), "")
			code2, w := request.JSON(t, "GET", r.url(widgetsPath+"/w"), "")
			code3, _ := request.JSON(t, "GET", r.url(appsPath+"/later"), "")
			return code == http.StatusOK && uid(kept) == uid(app) && code2 == http.StatusOK && uid(w) == uid(widget) && code3 == http.StatusNotFound
		}, r.name+" serves the saved state")
		code, body := rawGet(t, r.url(appsPath))
		require.Equal(t, http.StatusOK, code)
		items := itemsOf(t, body)
		assert.Greater(t, rvOf(t, items["kept"]), rvOf(t, before), "%s: versions after every earlier one", r.name)
	}

	// A watch from before the restore cannot resume on either replica.
	resp, err := http.Get(r1.url(appsPath + "?watch=true&resourceVersion=" + before))
	require.NoError(t, err)
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	require.NoError(t, err)
	var ev struct {
		Type   string
		Object struct{ Code int }
	}
	require.NoError(t, json.Unmarshal(line, &ev))
	assert.Equal(t, "ERROR", ev.Type)
	assert.Equal(t, http.StatusGone, ev.Object.Code)
}

func rvOf(t *testing.T, s string) uint64 {
	t.Helper()
	n, err := strconv.ParseUint(s, 10, 64)
	require.NoError(t, err)
	return n
}
