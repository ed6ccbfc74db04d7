package command_test

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/opemu/opemu/internal/command"
)

// noEnv is an environment in which nothing is set.
func noEnv(string) (string, bool) { return "", false }

// TestKubeconfig: the kubeconfig parses with client-go's loader; a plain-HTTP server's entry
// skips TLS verification (client-node needs it), an HTTPS server's does not.
func TestKubeconfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		server   string
		insecure bool
	}{
		{"http://127.0.0.1:3000", true},
		{"https://opemu.example:6443", false},
	} {
		t.Run(tt.server, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			require.Equal(t, 0, command.Run("test", []string{"kubeconfig", "--server", tt.server}, noEnv, &stdout, &stderr), stderr.String())
			cfg, err := clientcmd.Load(stdout.Bytes())
			require.NoError(t, err)
			cluster := cfg.Clusters[cfg.Contexts[cfg.CurrentContext].Cluster]
			require.NotNil(t, cluster)
			assert.Equal(t, tt.server, cluster.Server)
			assert.Equal(t, tt.insecure, cluster.InsecureSkipTLSVerify)
			assert.Equal(t, "default", cfg.Contexts[cfg.CurrentContext].Namespace)
		})
	}
}
