package command

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"

	opemu "github.com/opemu/opemu/app"
	"github.com/opemu/opemu/certs"
	"github.com/opemu/opemu/server"
)

// Tokens and TLS (SPEC §13): reading what the configuration names, before the server starts.

// checkSecurity rejects combinations of the §13 settings that cannot both hold, and fills
// TLS_DIR's default.
func checkSecurity(c *config) error {
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return errors.New("invalid TLS_CERT_FILE: TLS_CERT_FILE and TLS_KEY_FILE are set together")
	}
	if c.TLSMode == "self-signed" && c.TLSCertFile != "" {
		return errors.New("invalid TLS: self-signed and TLS_CERT_FILE exclude each other")
	}
	if len(c.TLSSANs) > 0 && c.TLSMode != "self-signed" {
		return errors.New("invalid TLS_SANS: it names hosts for TLS=self-signed, which is not set")
	}
	if c.InsecureNoAuth && (c.Token != "" || c.TokenFile != "") {
		return errors.New("invalid INSECURE_NO_AUTH: TOKEN or TOKEN_FILE is set; drop one or the other")
	}
	if c.TLSDir == "" {
		c.TLSDir = defaultTLSDir()
	}
	return nil
}

// defaultTLSDir is <user config dir>/opemu/tls (~/.config/opemu/tls on Linux), or
// <tmp>/opemu-tls when there is no user config directory.
func defaultTLSDir() string {
	if dir, err := os.UserConfigDir(); err == nil {
		return filepath.Join(dir, "opemu", "tls")
	}
	return filepath.Join(os.TempDir(), "opemu-tls")
}

// loadSecurity reads TOKEN_FILE and the certificates (generating them for TLS=self-signed) into
// c's Tokens, TLS and SelfSigned. Its errors are configuration errors: the process exits 2.
func loadSecurity(c *config) error {
	if c.Token != "" || c.TokenFile != "" {
		c.Tokens = server.NewTokens()
		if c.TokenFile != "" {
			if err := server.ReadTokenFile(c.TokenFile, c.Tokens); err != nil {
				return fmt.Errorf("invalid TOKEN_FILE: %w", err)
			}
			if c.Tokens.Len() == 0 {
				return fmt.Errorf("invalid TOKEN_FILE: %s holds no token", c.TokenFile)
			}
		}
		if c.Token != "" {
			if err := c.Tokens.Add(c.Token, opemu.AdminUser); err != nil {
				return fmt.Errorf("invalid TOKEN: %w", err)
			}
		}
	}
	switch {
	case c.TLSCertFile != "":
		cert, err := tls.LoadX509KeyPair(c.TLSCertFile, c.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("invalid TLS_CERT_FILE/TLS_KEY_FILE: %w", err)
		}
		c.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	case c.TLSMode == "self-signed":
		b, err := certs.Ensure(certs.Config{Dir: c.TLSDir, Hosts: tlsHosts(*c)})
		if err != nil {
			return fmt.Errorf("invalid TLS_DIR: %w", err)
		}
		c.SelfSigned = b
		c.TLS = &tls.Config{Certificates: []tls.Certificate{b.Certificate}, MinVersion: tls.VersionTLS12}
		// The CA opemu keeps signs client certificates too (its key is in TLS_DIR).
		c.ClientCA = x509.NewCertPool()
		c.ClientCA.AppendCertsFromPEM(b.CAPEM)
	}
	if c.ClientCAFile != "" {
		pem, err := os.ReadFile(c.ClientCAFile)
		if err != nil {
			return fmt.Errorf("invalid CLIENT_CA_FILE: %w", err)
		}
		if c.ClientCA == nil {
			c.ClientCA = x509.NewCertPool()
		}
		if !c.ClientCA.AppendCertsFromPEM(pem) {
			return fmt.Errorf("invalid CLIENT_CA_FILE: %s holds no PEM certificate", c.ClientCAFile)
		}
	}
	return loadEtcdTLS(c)
}

// loadEtcdTLS builds the TLS configuration for etcd from ETCD_CA_FILE, ETCD_CERT_FILE and
// ETCD_KEY_FILE (SPEC §12); none set means none (an https:// endpoint then uses the system's
// roots).
func loadEtcdTLS(c *config) error {
	if c.EtcdCAFile == "" && c.EtcdCertFile == "" {
		return nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.EtcdCAFile != "" {
		pem, err := os.ReadFile(c.EtcdCAFile)
		if err != nil {
			return fmt.Errorf("invalid ETCD_CA_FILE: %w", err)
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return fmt.Errorf("invalid ETCD_CA_FILE: %s holds no PEM certificate", c.EtcdCAFile)
		}
	}
	if c.EtcdCertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.EtcdCertFile, c.EtcdKeyFile)
		if err != nil {
			return fmt.Errorf("invalid ETCD_CERT_FILE/ETCD_KEY_FILE: %w", err)
		}
		t.Certificates = []tls.Certificate{cert}
	}
	c.EtcdTLS = t
	return nil
}

// tlsHosts are the names the self-signed certificate carries: the loopback names, this
// machine's hostname, the listen address when it is a specific one, and TLS_SANS.
func tlsHosts(c config) []string {
	hosts := []string{"localhost", "127.0.0.1", "::1"}
	if h, err := os.Hostname(); err == nil && certs.CheckHost(h) == nil {
		hosts = append(hosts, h)
	}
	if host, _, err := net.SplitHostPort(c.Addr); err == nil && host != "" {
		if ip := net.ParseIP(host); ip == nil || !ip.IsUnspecified() {
			hosts = append(hosts, host)
		}
	}
	return append(hosts, c.TLSSANs...)
}
