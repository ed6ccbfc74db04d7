package main

import (
	"testing"

	"github.com/opemu/opemu/examples/internal/suitetest"
)

// TestSuiteOnExistingCluster runs this package's tests again, unchanged, on the opemu binary
// (envtest's existing-cluster mode): the conversion webhook of the child process included.
func TestSuiteOnExistingCluster(t *testing.T) {
	if existingCluster {
		t.Skip("this process is the run on an existing cluster")
	}
	t.Parallel()
	suitetest.RunOnExistingCluster(t)
}
