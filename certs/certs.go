package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// The files Ensure keeps in Config.Dir.
const (
	// CAFile is the CA certificate (PEM): what clients trust.
	CAFile = "ca.crt"
	// CAKeyFile holds the CA's private key followed by its certificate (PEM). It is the CA's
	// record: created exclusively, so processes starting together agree on one CA.
	CAKeyFile = "ca.key"
	// CertFile is the serving certificate (PEM) and KeyFile its private key.
	CertFile = "tls.crt"
	KeyFile  = "tls.key"
)

const (
	caValidity   = 10 * 365 * 24 * time.Hour
	certValidity = 365 * 24 * time.Hour
	// renewBefore is how close to expiry a certificate is replaced at start.
	renewBefore = 30 * 24 * time.Hour
	// backdate covers clocks that run a little behind this machine's.
	backdate = time.Hour
)

// Config says where the certificates live and whom the serving certificate names.
type Config struct {
	// Dir keeps the CA and the serving certificate; it is created (0700) when missing.
	Dir string
	// Hosts are the DNS names and IP addresses the serving certificate must name. Empty means
	// localhost, 127.0.0.1 and ::1.
	Hosts []string
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Bundle is what Ensure leaves ready: the serving certificate and the CA that signed it.
type Bundle struct {
	// Certificate is the serving certificate with its key, for tls.Config.Certificates.
	Certificate tls.Certificate
	// CAPEM is the CA certificate in PEM, as written to CAFile.
	CAPEM []byte
	// CAPath is the path of CAFile.
	CAPath string
	// NewCA and NewCert report what this call generated (rather than reused).
	NewCA, NewCert bool
}

// Ensure returns the serving certificate for cfg.Hosts signed by the CA in cfg.Dir, creating
// the CA when there is none (or it expired) and the serving certificate when there is none,
// it names other hosts, it nears expiry, or another CA signed it.
func Ensure(cfg Config) (*Bundle, error) {
	if cfg.Dir == "" {
		return nil, errors.New("certs: Dir is required")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if len(cfg.Hosts) == 0 {
		cfg.Hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	dnsNames, ips, err := splitHosts(cfg.Hosts)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	now := cfg.Now()
	ca, caKey, newCA, err := ensureCA(cfg.Dir, now)
	if err != nil {
		return nil, err
	}
	caPEM := pemBlock("CERTIFICATE", ca.Raw)
	caPath := filepath.Join(cfg.Dir, CAFile)
	if cur, err := os.ReadFile(caPath); err != nil || !bytes.Equal(cur, caPEM) {
		if err := writeAtomic(caPath, caPEM, 0o644); err != nil {
			return nil, err
		}
	}
	b := &Bundle{CAPEM: caPEM, CAPath: caPath, NewCA: newCA}
	certPath, keyPath := filepath.Join(cfg.Dir, CertFile), filepath.Join(cfg.Dir, KeyFile)
	if cert, err := tls.LoadX509KeyPair(certPath, keyPath); err == nil && !newCA && servesHosts(cert, ca, dnsNames, ips, now) {
		b.Certificate = cert
		return b, nil
	}
	certPEM, keyPEM, err := newServingCert(ca, caKey, dnsNames, ips, now)
	if err != nil {
		return nil, err
	}
	// The key first: a reader that meets the new key beside the old certificate sees a
	// mismatched pair and regenerates, never a certificate for a key it lacks.
	if err := writeAtomic(keyPath, keyPEM, 0o600); err != nil {
		return nil, err
	}
	if err := writeAtomic(certPath, certPEM, 0o644); err != nil {
		return nil, err
	}
	if b.Certificate, err = tls.X509KeyPair(certPEM, keyPEM); err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	b.NewCert = true
	return b, nil
}

// Generate makes a new CA and a serving certificate it signs for hosts (DNS names and IP
// addresses; empty means localhost, 127.0.0.1 and ::1), in memory, as PEM. It is for
// certificates that live as long as a test (testenv's webhook serving certificate), where
// Ensure's durable, shared files would only cost time.
func Generate(hosts []string, now time.Time) (caPEM, certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		hosts = []string{"localhost", "127.0.0.1", "::1"}
	}
	dnsNames, ips, err := splitHosts(hosts)
	if err != nil {
		return nil, nil, nil, err
	}
	_, ca, caKey, err := newCA(now)
	if err != nil {
		return nil, nil, nil, err
	}
	certPEM, keyPEM, err = newServingCert(ca, caKey, dnsNames, ips, now)
	if err != nil {
		return nil, nil, nil, err
	}
	return pemBlock("CERTIFICATE", ca.Raw), certPEM, keyPEM, nil
}

// ensureCA loads the CA from dir, or creates it when missing or expiring.
func ensureCA(dir string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, bool, error) {
	path := filepath.Join(dir, CAKeyFile)
	for attempt := 0; attempt < 2; attempt++ {
		data, err := os.ReadFile(path)
		if err == nil {
			ca, key, err := parseCA(data)
			if err != nil {
				return nil, nil, false, fmt.Errorf("certs: %s: %w (remove it to make a new CA)", path, err)
			}
			if now.Add(renewBefore).Before(ca.NotAfter) {
				return ca, key, false, nil
			}
			// Expired or about to: clients must be given the new CA anyway.
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, nil, false, fmt.Errorf("certs: %w", err)
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, nil, false, fmt.Errorf("certs: %w", err)
		}
		record, ca, key, err := newCA(now)
		if err != nil {
			return nil, nil, false, err
		}
		created, err := createExclusive(path, record)
		if err != nil {
			return nil, nil, false, err
		}
		if created {
			return ca, key, true, nil
		}
		// Another process made the CA first: use theirs.
	}
	return nil, nil, false, fmt.Errorf("certs: could not create or read %s", path)
}

func newCA(now time.Time) (record []byte, ca *x509.Certificate, key *ecdsa.PrivateKey, err error) {
	key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("certs: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("opemu-ca@%d", now.Unix()), Organization: []string{"opemu"}},
		NotBefore:             now.Add(-backdate),
		NotAfter:              now.Add(caValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("certs: %w", err)
	}
	ca, err = x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("certs: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("certs: %w", err)
	}
	record = append(pemBlock("PRIVATE KEY", keyDER), pemBlock("CERTIFICATE", der)...)
	return record, ca, key, nil
}

func parseCA(data []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	var ca *x509.Certificate
	var key *ecdsa.PrivateKey
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			break
		}
		switch block.Type {
		case "PRIVATE KEY":
			k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
			if err != nil {
				return nil, nil, err
			}
			ek, ok := k.(*ecdsa.PrivateKey)
			if !ok {
				return nil, nil, fmt.Errorf("the CA key is a %T, not ECDSA", k)
			}
			key = ek
		case "CERTIFICATE":
			c, err := x509.ParseCertificate(block.Bytes)
			if err != nil {
				return nil, nil, err
			}
			ca = c
		}
	}
	if ca == nil || key == nil {
		return nil, nil, errors.New("want a PRIVATE KEY and a CERTIFICATE block")
	}
	if !ca.IsCA || !key.PublicKey.Equal(ca.PublicKey) {
		return nil, nil, errors.New("the certificate is not a CA for this key")
	}
	return ca, key, nil
}

func newServingCert(ca *x509.Certificate, caKey *ecdsa.PrivateKey, dnsNames []string, ips []net.IP, now time.Time) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, nil, err
	}
	notAfter := now.Add(certValidity)
	if notAfter.After(ca.NotAfter) {
		notAfter = ca.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "opemu", Organization: []string{"opemu"}},
		NotBefore:    now.Add(-backdate),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: %w", err)
	}
	return pemBlock("CERTIFICATE", der), pemBlock("PRIVATE KEY", keyDER), nil
}

// servesHosts reports whether cert is signed by ca, valid well past now, and names exactly
// dnsNames and ips.
func servesHosts(cert tls.Certificate, ca *x509.Certificate, dnsNames []string, ips []net.IP, now time.Time) bool {
	if len(cert.Certificate) == 0 {
		return false
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil || leaf.CheckSignatureFrom(ca) != nil {
		return false
	}
	if now.Before(leaf.NotBefore) || !now.Add(renewBefore).Before(leaf.NotAfter) {
		return false
	}
	have := slices.Sorted(slices.Values(leaf.DNSNames))
	if !slices.Equal(have, dnsNames) || len(leaf.IPAddresses) != len(ips) {
		return false
	}
	for i, ip := range sortedIPs(leaf.IPAddresses) {
		if !ip.Equal(ips[i]) {
			return false
		}
	}
	return true
}

// splitHosts sorts hosts into DNS names and IP addresses, deduplicated and sorted.
func splitHosts(hosts []string) ([]string, []net.IP, error) {
	var names []string
	var ips []net.IP
	for _, h := range hosts {
		h = strings.TrimSpace(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]"))
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if !slices.ContainsFunc(ips, ip.Equal) {
				ips = append(ips, ip)
			}
			continue
		}
		if err := CheckHost(h); err != nil {
			return nil, nil, err
		}
		h = strings.ToLower(h)
		if !slices.Contains(names, h) {
			names = append(names, h)
		}
	}
	slices.Sort(names)
	return names, sortedIPs(ips), nil
}

// CheckHost reports whether h can be named by a certificate: an IP address, or a DNS name
// (letters, digits, '-' and '.', an optional leading "*." wildcard).
func CheckHost(h string) error {
	if net.ParseIP(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")) != nil {
		return nil
	}
	name := strings.TrimPrefix(h, "*.")
	if name == "" || len(name) > 253 {
		return fmt.Errorf("%q is neither an IP address nor a DNS name", h)
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("%q is neither an IP address nor a DNS name", h)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return fmt.Errorf("%q is neither an IP address nor a DNS name", h)
			}
		}
	}
	return nil
}

func sortedIPs(ips []net.IP) []net.IP {
	out := make([]net.IP, len(ips))
	for i, ip := range ips {
		if v4 := ip.To4(); v4 != nil {
			ip = v4
		}
		out[i] = ip
	}
	slices.SortFunc(out, func(a, b net.IP) int { return bytes.Compare(a.To16(), b.To16()) })
	return out
}

func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// writeAtomic replaces path with data: readers see the old file or the new one, never a part.
func writeAtomic(path string, data []byte, perm os.FileMode) error {
	tmp, err := writeTemp(path, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("certs: %w", err)
	}
	return nil
}

// createExclusive creates path with data unless it exists; it reports whether it did.
func createExclusive(path string, data []byte) (bool, error) {
	tmp, err := writeTemp(path, data, 0o600)
	if err != nil {
		return false, err
	}
	defer os.Remove(tmp)
	// A hard link is created whole or not at all, and fails when path exists.
	if err := os.Link(tmp, path); err != nil {
		if errors.Is(err, os.ErrExist) {
			return false, nil
		}
		return false, fmt.Errorf("certs: %w", err)
	}
	return true, nil
}

func writeTemp(path string, data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return "", fmt.Errorf("certs: %w", err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", fmt.Errorf("certs: %w", err)
	}
	return f.Name(), nil
}
