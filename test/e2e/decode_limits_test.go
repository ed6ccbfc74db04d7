package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/request"
)

// Hostile request bodies that decoding used to pay for (issue 34), against the binary as it
// ships (shippedBinary), as limits_test.go's.

// TestYAMLAliasesInTimeAndMemory: a 2 MB YAML body of 500 aliases of one 2 MB scalar (1 GB once
// expanded; it took 3.45 GB before) is refused with a 413 within 5 s on create, update and
// server-side apply, and the process's peak resident size grows by less than 100 MB over all
// three.
func TestYAMLAliasesInTimeAndMemory(t *testing.T) {
	// Not parallel: measured alone, and kept from starving the timing-bound HA tests.
	p := startBinary(t, shippedBinary(t), "ENABLE_CONTROLLER=false")
	api := "http://" + p.addr + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	code, _, _ := request.Timed(t, "POST", api, "application/json", request.AppJSON)
	require.Equal(t, http.StatusCreated, code)
	before := procStatus(t, p, "VmHWM")

	bomb := func(name string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "apiVersion: cloudnative.elide.dev/v1\nkind: Application\nmetadata: {name: %s}\nspec:\n  replicas: 1\n  image: nginx:1\n  config:\n    a0: &big %s\n", name, strings.Repeat("x", 2<<20))
		for i := 1; i <= 500; i++ {
			fmt.Fprintf(&b, "    a%d: *big\n", i)
		}
		return b.String()
	}
	for _, tt := range []struct{ name, method, url, contentType, body string }{
		{"create", "POST", api, "application/yaml", bomb("bomb")},
		{"update", "PUT", api + "/web", "application/yaml", bomb("web")},
		{"server-side apply", "PATCH", api + "/web?fieldManager=m", "application/apply-patch+yaml", bomb("web")},
	} {
		code, body, took := request.Timed(t, tt.method, tt.url, tt.contentType, tt.body)
		t.Logf("%s of %.1f MB of YAML: %d in %v", tt.name, float64(len(tt.body))/1e6, code, took)
		assert.Equal(t, http.StatusRequestEntityTooLarge, code, "%s: %.300s", tt.name, body)
		assert.Contains(t, string(body), `"reason":"RequestEntityTooLarge"`, tt.name)
		assert.Less(t, took, 5*time.Second, tt.name)
	}
	grew := procStatus(t, p, "VmHWM") - before
	t.Logf("peak RSS grew by %.1f MB over the aliases", float64(grew)/(1<<20))
	assert.Less(t, grew, int64(100<<20))
}
