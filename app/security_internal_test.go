package app

import (
	"bytes"
	"log/slog"
	"net"
	"net/url"
	"regexp"
	"testing"

	"github.com/opemu/opemu/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var generatedRE = regexp.MustCompile(`token=(\S+) dashboard="?([^"\s]+)"? kubeconfig=`)

// TestGeneratedToken: listening beyond loopback with no token configured generates one and
// logs it with a dashboard URL that logs the browser in, unless INSECURE_NO_AUTH; a loopback
// listener needs none, and configured tokens are kept.
func TestGeneratedToken(t *testing.T) {
	t.Parallel()
	wildcard := &net.TCPAddr{IP: net.IPv4zero, Port: 3000}
	loopback := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 3000}
	lan := &net.TCPAddr{IP: net.IPv4(192, 168, 1, 5), Port: 3000}
	configured := server.NewTokens()
	require.NoError(t, configured.Add("mine", AdminUser))
	tests := []struct {
		name      string
		cfg       Config
		addr      net.Addr
		generated bool
		url       string
		inLog     string
		notInLog  string
	}{
		{name: "wildcard", addr: wildcard, generated: true, url: "http://127.0.0.1:3000/ui/?token="},
		{name: "a LAN address", addr: lan, generated: true, url: "http://192.168.1.5:3000/ui/?token="},
		{name: "loopback", addr: loopback, notInLog: "token"},
		{name: "insecure on purpose", cfg: Config{InsecureNoAuth: true}, addr: wildcard, inLog: "WITHOUT authentication"},
		{name: "configured", cfg: Config{Tokens: configured}, addr: wildcard, inLog: "authentication on", notInLog: "generated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var buf bytes.Buffer
			tokens, err := security(slog.New(slog.NewTextHandler(&buf, nil)), tt.cfg, tt.addr)
			require.NoError(t, err)
			if tt.inLog != "" {
				assert.Contains(t, buf.String(), tt.inLog)
			}
			if tt.notInLog != "" {
				assert.NotContains(t, buf.String(), tt.notInLog)
			}
			if !tt.generated {
				assert.Equal(t, tt.cfg.Tokens, tokens)
				return
			}
			require.NotNil(t, tokens)
			m := generatedRE.FindStringSubmatch(buf.String())
			require.NotNil(t, m, buf.String())
			token, dashboard := m[1], m[2]
			assert.Len(t, token, 48)
			assert.Equal(t, tt.url+token, dashboard)
			u, ok := tokens.Authenticate(token)
			require.True(t, ok)
			assert.Equal(t, "admin", u.Name)
			parsed, err := url.Parse(dashboard)
			require.NoError(t, err)
			assert.Equal(t, token, parsed.Query().Get("token"))
		})
	}
	// Two starts generate two tokens.
	a, err := security(slog.New(slog.DiscardHandler), Config{}, wildcard)
	require.NoError(t, err)
	b, err := security(slog.New(slog.DiscardHandler), Config{}, wildcard)
	require.NoError(t, err)
	assert.NotEqual(t, a, b)
}
