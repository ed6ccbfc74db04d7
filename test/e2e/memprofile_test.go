package e2e

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var profileRecordRE = regexp.MustCompile(`(?m)^\d+: \d+ \[\d+: \d+\] @`)

// TestHeapProfileStartsWithTheServer: package initialisation runs with heap-profile sampling
// off (package internal/memprofile, initialised before the packages that allocate; each
// sample maps pages of the function table, SPEC §10's idle RSS), and PPROF turns it on for
// what the server allocates. With one P the runtime records one sample when the rate changes,
// and at most one more at the first allocation; a build where sampling ran through
// initialisation (6.4 MB at one sample per 512 KiB) shows 5-8 stacks of it.
func TestHeapProfileStartsWithTheServer(t *testing.T) {
	t.Parallel()
	p := start(t, "GOMAXPROCS=1", "PPROF=true", "ENABLE_CONTROLLER=false", "ENABLE_LEADER_ELECTION=false")
	resp, err := http.Get("http://" + p.addr + "/debug/pprof/allocs?debug=1")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	starts := profileRecordRE.FindAllIndex(b, -1)
	require.NotEmpty(t, starts, "the server's allocations are sampled with PPROF")
	inits := 0
	for i, s := range starts {
		end := len(b)
		if i+1 < len(starts) {
			end = starts[i+1][0]
		}
		if bytes.Contains(b[s[0]:end], []byte("runtime.doInit")) {
			inits++
		}
	}
	assert.LessOrEqual(t, inits, 2, "stacks of package initialisation in the heap profile:\n%s", b)
}
