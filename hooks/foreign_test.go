package hooks_test

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// secret is what the services a hook or webhook URL may reach answer: no report may carry it.
const secret = "SECRET-7f3a"

// unreachable are URLs a hook or webhook cannot call, each failing differently at the
// connection: whatever the difference, the reports are the same (but for the URL), so none
// tells an open port from a closed one, nor what listens on it.
func unreachable(t *testing.T) map[string]string {
	t.Helper()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	closedURL := "http://" + closed.Addr().String() + "/hook"
	require.NoError(t, closed.Close())

	plain := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, secret)
	}))
	t.Cleanup(plain.Close)
	untrusted := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, secret)
	}))
	t.Cleanup(untrusted.Close)

	return map[string]string{
		"closed port": closedURL,
		// A service that is not HTTP: it greets with a banner, as SSH or SMTP do.
		"banner":           "http://" + tcpService(t, func(c net.Conn) { _, _ = io.WriteString(c, "SSH-2.0-"+secret+"\r\n") }) + "/hook",
		"closes at once":   "http://" + tcpService(t, func(net.Conn) {}) + "/hook",
		"https to http":    "https://" + strings.TrimPrefix(plain.URL, "http://") + "/hook",
		"untrusted server": untrusted.URL + "/hook",
	}
}

// tcpService listens on a free port and runs serve on each connection, then closes it.
func tcpService(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			serve(c)
			_ = c.Close()
		}
	})
	t.Cleanup(func() {
		_ = ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

// sameReports asserts that the reports (by case) are one report but for each case's URL.
func sameReports(t *testing.T, urls, reports map[string]string) {
	t.Helper()
	var first, firstCase string
	for name, r := range reports {
		require.NotContains(t, r, secret, "%s: the report carries what the service said", name)
		r = strings.ReplaceAll(r, urls[name], "URL")
		if first == "" {
			first, firstCase = r, name
			continue
		}
		require.Equal(t, first, r, "%q and %q are told apart", firstCase, name)
	}
}
