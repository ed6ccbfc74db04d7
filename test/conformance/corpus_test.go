package conformance_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/conformance"
)

// TestCorpusLoads: the case files parse (strictly: a misspelt field is an error), names are
// unique DNS labels, and every template a case names exists.
func TestCorpusLoads(t *testing.T) {
	c, err := conformance.LoadCorpus("cases")
	require.NoError(t, err)
	assert.NotEmpty(t, c.Cases)
	assert.NotEmpty(t, c.Fixtures)
}
