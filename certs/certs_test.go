package certs_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/opemu/opemu/certs"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var start = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

func at(t time.Time) func() time.Time { return func() time.Time { return t } }

func leaf(t *testing.T, b *certs.Bundle) *x509.Certificate {
	t.Helper()
	c, err := x509.ParseCertificate(b.Certificate.Certificate[0])
	require.NoError(t, err)
	return c
}

func pool(t *testing.T, caPEM []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	require.True(t, p.AppendCertsFromPEM(caPEM))
	return p
}

func TestEnsureCreatesThenReuses(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "tls")
	hosts := []string{"localhost", "127.0.0.1", "::1", "opemu.example"}
	first, err := certs.Ensure(certs.Config{Dir: dir, Hosts: hosts, Now: at(start)})
	require.NoError(t, err)
	assert.True(t, first.NewCA)
	assert.True(t, first.NewCert)
	assert.Equal(t, filepath.Join(dir, certs.CAFile), first.CAPath)

	// The files, with private keys readable by the owner only.
	for name, mode := range map[string]os.FileMode{certs.CAFile: 0o644, certs.CAKeyFile: 0o600, certs.CertFile: 0o644, certs.KeyFile: 0o600} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err, name)
		assert.Equal(t, mode, fi.Mode().Perm(), name)
	}
	onDisk, err := os.ReadFile(first.CAPath)
	require.NoError(t, err)
	assert.Equal(t, first.CAPEM, onDisk)

	// The serving certificate verifies against the CA for every name asked for.
	c := leaf(t, first)
	for _, name := range []string{"localhost", "127.0.0.1", "::1", "opemu.example"} {
		_, err := c.Verify(x509.VerifyOptions{Roots: pool(t, first.CAPEM), DNSName: name, CurrentTime: start, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		assert.NoError(t, err, name)
	}
	_, err = c.Verify(x509.VerifyOptions{Roots: pool(t, first.CAPEM), DNSName: "other.example", CurrentTime: start})
	assert.Error(t, err)

	// A restart a day later reuses both.
	again, err := certs.Ensure(certs.Config{Dir: dir, Hosts: hosts, Now: at(start.Add(24 * time.Hour))})
	require.NoError(t, err)
	assert.False(t, again.NewCA)
	assert.False(t, again.NewCert)
	assert.Equal(t, first.CAPEM, again.CAPEM)
	assert.Equal(t, first.Certificate.Certificate[0], again.Certificate.Certificate[0])
}

func TestEnsureRenewsTheServingCertificate(t *testing.T) {
	t.Parallel()
	hosts := []string{"localhost", "127.0.0.1"}
	tests := []struct {
		name  string
		prep  func(t *testing.T, dir string)
		hosts []string
		now   time.Time
	}{
		{name: "names changed", hosts: []string{"localhost", "127.0.0.1", "10.0.0.5"}, now: start},
		{name: "a name dropped", hosts: []string{"localhost"}, now: start},
		{name: "near expiry", hosts: hosts, now: start.Add(340 * 24 * time.Hour)},
		{name: "key does not match", hosts: hosts, now: start, prep: func(t *testing.T, dir string) {
			other, err := certs.Ensure(certs.Config{Dir: t.TempDir(), Now: at(start)})
			require.NoError(t, err)
			key, err := os.ReadFile(filepath.Join(filepath.Dir(other.CAPath), certs.KeyFile))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, certs.KeyFile), key, 0o600))
		}},
		{name: "certificate removed", hosts: hosts, now: start, prep: func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, certs.CertFile)))
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			first, err := certs.Ensure(certs.Config{Dir: dir, Hosts: hosts, Now: at(start)})
			require.NoError(t, err)
			if tt.prep != nil {
				tt.prep(t, dir)
			}
			next, err := certs.Ensure(certs.Config{Dir: dir, Hosts: tt.hosts, Now: at(tt.now)})
			require.NoError(t, err)
			assert.False(t, next.NewCA, "the CA is kept")
			assert.Equal(t, first.CAPEM, next.CAPEM)
			assert.True(t, next.NewCert)
			assert.NotEqual(t, first.Certificate.Certificate[0], next.Certificate.Certificate[0])
			c := leaf(t, next)
			require.NoError(t, c.CheckSignatureFrom(mustParse(t, next.CAPEM)))
			assert.True(t, c.NotAfter.After(tt.now.Add(300*24*time.Hour)))
		})
	}
}

func TestEnsureReplacesAnExpiredCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first, err := certs.Ensure(certs.Config{Dir: dir, Now: at(start)})
	require.NoError(t, err)
	later := start.Add(10 * 365 * 24 * time.Hour)
	next, err := certs.Ensure(certs.Config{Dir: dir, Now: at(later)})
	require.NoError(t, err)
	assert.True(t, next.NewCA)
	assert.True(t, next.NewCert)
	assert.NotEqual(t, first.CAPEM, next.CAPEM)
}

func TestEnsureConcurrentStartsAgreeOnOneCA(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var wg sync.WaitGroup
	out := make([]*certs.Bundle, 6)
	errs := make([]error, len(out))
	for i := range out {
		wg.Go(func() { out[i], errs[i] = certs.Ensure(certs.Config{Dir: dir, Now: at(start)}) })
	}
	wg.Wait()
	onDisk, err := os.ReadFile(filepath.Join(dir, certs.CAFile))
	require.NoError(t, err)
	created := 0
	for i, b := range out {
		require.NoError(t, errs[i])
		assert.Equal(t, string(onDisk), string(b.CAPEM), "every process serves under the CA on disk")
		if b.NewCA {
			created++
		}
	}
	assert.Equal(t, 1, created)
}

func TestEnsureRejects(t *testing.T) {
	t.Parallel()
	_, err := certs.Ensure(certs.Config{})
	assert.Error(t, err)
	_, err = certs.Ensure(certs.Config{Dir: t.TempDir(), Hosts: []string{"not a host"}})
	assert.Error(t, err)
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, certs.CAKeyFile), []byte("garbage"), 0o600))
	_, err = certs.Ensure(certs.Config{Dir: dir})
	assert.ErrorContains(t, err, "remove it")
}

func TestCheckHost(t *testing.T) {
	t.Parallel()
	for _, ok := range []string{"localhost", "opemu.example.com", "*.example.com", "10.0.0.1", "::1", "[::1]", "my-host"} {
		assert.NoError(t, certs.CheckHost(ok), ok)
	}
	for _, bad := range []string{"", "a b", "http://x", "-x.example", "x..example", "host:3000", "*"} {
		assert.Error(t, certs.CheckHost(bad), bad)
	}
}

// TestHandshake serves HTTPS with the bundle and connects with only the CA trusted.
func TestHandshake(t *testing.T) {
	t.Parallel()
	b, err := certs.Ensure(certs.Config{Dir: t.TempDir()})
	require.NoError(t, err)
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{b.Certificate}}
	srv.StartTLS()
	defer srv.Close()
	_, port, _ := net.SplitHostPort(srv.Listener.Addr().String())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, b.CAPEM)}}}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		resp, err := client.Get("https://" + net.JoinHostPort(host, port))
		require.NoError(t, err, host)
		resp.Body.Close()
		assert.Equal(t, http.StatusOK, resp.StatusCode)
	}
}

func mustParse(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(pemBytes)
	require.NotNil(t, block)
	c, err := x509.ParseCertificate(block.Bytes)
	require.NoError(t, err)
	return c
}

// TestGenerate: a CA and a serving certificate in memory, for the hosts asked for only, and
// a new CA each time.
func TestGenerate(t *testing.T) {
	t.Parallel()
	caPEM, certPEM, keyPEM, err := certs.Generate([]string{"127.0.0.1", "webhook.local"}, start)
	require.NoError(t, err)
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	require.NoError(t, err, "the key is the certificate's")
	c := mustParse(t, certPEM)
	for _, host := range []string{"127.0.0.1", "webhook.local"} {
		_, err := c.Verify(x509.VerifyOptions{Roots: pool(t, caPEM), DNSName: host, CurrentTime: start})
		assert.NoError(t, err, host)
	}
	_, err = c.Verify(x509.VerifyOptions{Roots: pool(t, caPEM), DNSName: "localhost", CurrentTime: start})
	assert.Error(t, err, "only the hosts asked for")
	assert.NotNil(t, pair.Certificate)

	other, _, _, err := certs.Generate(nil, start)
	require.NoError(t, err)
	assert.NotEqual(t, caPEM, other)
	_, _, _, err = certs.Generate([]string{"not a host"}, start)
	assert.Error(t, err)
}
