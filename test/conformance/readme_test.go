package conformance_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/conformance"
)

// TestDifferencesMatchREADME: the README's "Deliberate differences from Kubernetes" and
// differences.yaml say the same thing: every bullet is one entry (the entry's bullet is how the
// bullet starts), and every entry is one bullet.
func TestDifferencesMatchREADME(t *testing.T) {
	raw, err := os.ReadFile("../../README.md")
	require.NoError(t, err)
	bullets := readmeBullets(t, string(raw), "## Deliberate differences from Kubernetes")
	require.NotEmpty(t, bullets, "the README has a Deliberate differences section with bullets")
	lists, err := conformance.LoadDeclared(".")
	require.NoError(t, err)
	entries := lists[0].Entries // differences.yaml
	taken := map[int]string{}
	for _, e := range entries {
		if !assert.NotEmpty(t, e.Bullet, "differences.yaml: %s names no README bullet", e.ID) {
			continue
		}
		start := strings.Join(strings.Fields(e.Bullet), " ")
		var found []int
		for i, b := range bullets {
			if strings.HasPrefix(b, start) {
				found = append(found, i)
			}
		}
		if !assert.Len(t, found, 1, "differences.yaml: %s: the README's differences have one bullet starting %q", e.ID, start) {
			continue
		}
		if other, dup := taken[found[0]]; dup {
			t.Errorf("differences.yaml: %s and %s are the same README bullet", other, e.ID)
		}
		taken[found[0]] = e.ID
	}
	for i, b := range bullets {
		if _, ok := taken[i]; !ok {
			t.Errorf("the README's deliberate difference %q has no entry in differences.yaml", b[:min(len(b), 100)])
		}
	}
}

// readmeBullets returns the top-level bullets of the section under heading, each on one line
// with its white space collapsed.
func readmeBullets(t *testing.T, readme, heading string) []string {
	t.Helper()
	i := strings.Index(readme, "\n"+heading+"\n")
	require.GreaterOrEqual(t, i, 0, "the README has %q", heading)
	section := readme[i+len(heading)+2:]
	if j := strings.Index(section, "\n## "); j >= 0 {
		section = section[:j]
	}
	var bullets []string
	for _, line := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(line, "- "):
			bullets = append(bullets, strings.TrimPrefix(line, "- "))
		case strings.HasPrefix(line, "  ") && len(bullets) > 0 && strings.TrimSpace(line) != "":
			bullets[len(bullets)-1] += " " + strings.TrimSpace(line)
		}
	}
	for i, b := range bullets {
		bullets[i] = strings.Join(strings.Fields(b), " ")
	}
	return bullets
}
