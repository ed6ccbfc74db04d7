package main

import (
	"context"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// walkthrough returns the shell commands of the README's "A walkthrough with curl" section:
// every bash block, without the lines that start the server or stream forever (curl -N).
func walkthrough(t *testing.T) string {
	t.Helper()
	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	text := string(readme)
	start := strings.Index(text, "## A walkthrough with curl")
	require.GreaterOrEqual(t, start, 0)
	end := strings.Index(text[start+3:], "\n## ")
	require.Greater(t, end, 0)
	section := text[start : start+3+end]
	var script []string
	for _, m := range regexp.MustCompile("(?s)```bash\n(.*?)```").FindAllStringSubmatch(section, -1) {
		for _, line := range strings.Split(m[1], "\n") {
			if strings.HasPrefix(line, "go run") || strings.Contains(line, "curl -N") {
				continue
			}
			script = append(script, line)
		}
	}
	return strings.Join(script, "\n")
}

// TestREADMEWalkthrough runs the README's curl walkthrough verbatim (but for the port) against
// the default, loopback-only setup: the request guard must not get in the way of curl.
func TestREADMEWalkthrough(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("curl is required in CI (.ci/run installs the Debian package curl): %v", err)
		}
		t.Skip("curl not installed")
	}
	p := start(t, "ROLLOUT_STEP=0")
	script := strings.ReplaceAll(walkthrough(t), "127.0.0.1:3000", p.addr)
	require.Contains(t, script, "curl -i -X POST $API")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", script)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the walkthrough failed:\n%s", out)
	o := string(out)
	for _, want := range []string{
		"HTTP/1.1 201 Created",     // the first create
		`"kind":"ApplicationList"`, // the list
		`"reason":"Conflict"`,      // the stale resourceVersion
		`"field":"spec.replicas"`,  // replicas > 100
		`"field":"spec.image"`,     // no image
		`"reason":"Forbidden"`,     // the blocked base image
		`"allowed":true`,           // /validate
		`"kind":"Scale"`,           // the scale subresource
		`"reason":"Cleanup"`,       // the operator's Events
	} {
		assert.True(t, strings.Contains(o, want), "the walkthrough's output lacks %s", want)
	}
	for _, refusal := range []string{"ALLOWED_HOSTS", "ALLOWED_ORIGINS", "Unauthorized"} {
		assert.False(t, strings.Contains(o, refusal), "the request guard refused a README command (%s)", refusal)
	}
}
