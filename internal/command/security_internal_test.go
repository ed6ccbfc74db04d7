package command

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadSecurity(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file := filepath.Join(dir, "tokens.csv")
	require.NoError(t, os.WriteFile(file, []byte("t-alice,alice,1\n"), 0o600))
	c := config{Token: "t-admin", TokenFile: file}
	require.NoError(t, loadSecurity(&c))
	for token, user := range map[string]string{"t-admin": "admin", "t-alice": "alice"} {
		u, ok := c.Tokens.Authenticate(token)
		require.True(t, ok, token)
		assert.Equal(t, user, u.Name)
	}
	assert.Nil(t, c.TLS)

	c = config{TLSMode: "self-signed", TLSDir: filepath.Join(dir, "tls"), TLSSANs: []string{"opemu.test", "10.1.2.3"}}
	c.Addr = "127.0.0.1:0"
	require.NoError(t, loadSecurity(&c))
	require.NotNil(t, c.TLS)
	require.NotNil(t, c.SelfSigned)
	leaf := c.SelfSigned.Certificate.Leaf
	require.NotNil(t, leaf)
	assert.Contains(t, leaf.DNSNames, "opemu.test")
	assert.Contains(t, leaf.DNSNames, "localhost")
	var ips []string
	for _, ip := range leaf.IPAddresses {
		ips = append(ips, ip.String())
	}
	assert.Subset(t, ips, []string{"127.0.0.1", "::1", "10.1.2.3"})

	empty := filepath.Join(dir, "empty.csv")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	for name, c := range map[string]config{
		"missing token file": {TokenFile: filepath.Join(dir, "missing")},
		"empty token file":   {TokenFile: empty},
		"missing cert files": {TLSCertFile: filepath.Join(dir, "c"), TLSKeyFile: filepath.Join(dir, "k")},
	} {
		assert.Error(t, loadSecurity(&c), name)
	}
}
