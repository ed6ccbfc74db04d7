package e2e

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/opemu/opemu/test/internal/request"
)

// TestEtcdTLS: with ETCD_CA_FILE, ETCD_CERT_FILE and ETCD_KEY_FILE a replica talks to an etcd
// that serves TLS and requires client certificates (a client without one is refused).
func TestEtcdTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := writeTestPKI(t, dir)
	e := etcdtest.StartTLS(t, etcdtest.TLS{CAFile: files["ca.crt"], CertFile: files["server.crt"], KeyFile: files["server.key"], Client: clientTLS(t, files)})

	// Without a client certificate etcd refuses.
	bare, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint}, Logger: zap.NewNop(),
		TLS: &tls.Config{RootCAs: clientTLS(t, files).RootCAs, MinVersion: tls.VersionTLS12}})
	require.NoError(t, err)
	defer bare.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err = bare.Get(ctx, "x")
	cancel()
	require.Error(t, err, "etcd requires a client certificate")

	r := etcdReplica(t, "tls-1", e, "/tls", "ENABLE_CONTROLLER=false",
		"ETCD_CA_FILE="+files["ca.crt"], "ETCD_CERT_FILE="+files["client.crt"], "ETCD_KEY_FILE="+files["client.key"])
	code, obj := request.JSON(t, "POST", r.url(appsPath), appBody("over-tls", 1))
	require.Equal(t, http.StatusCreated, code, "%v", obj)
}

// writeTestPKI writes a CA, etcd's serving certificate for 127.0.0.1 and a client certificate
// into dir and returns their paths by file name.
func writeTestPKI(t *testing.T, dir string) map[string]string {
	t.Helper()
	key := func() *ecdsa.PrivateKey {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		require.NoError(t, err)
		return k
	}
	caKey := key()
	now := time.Now()
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: now.Add(-time.Hour),
		NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)
	out := map[string]string{}
	write := func(name, typ string, der []byte) {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		out[name] = p
	}
	write("ca.crt", "CERTIFICATE", caDER)
	leaf := func(name string, serial int64, usage x509.ExtKeyUsage) {
		k := key()
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name}, NotBefore: now.Add(-time.Hour),
			NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &k.PublicKey, caKey)
		require.NoError(t, err)
		kder, err := x509.MarshalPKCS8PrivateKey(k)
		require.NoError(t, err)
		write(name+".crt", "CERTIFICATE", der)
		write(name+".key", "PRIVATE KEY", kder)
	}
	leaf("server", 2, x509.ExtKeyUsageServerAuth)
	leaf("client", 3, x509.ExtKeyUsageClientAuth)
	return out
}

// clientTLS is the TLS configuration of a client of the test PKI's etcd.
func clientTLS(t *testing.T, files map[string]string) *tls.Config {
	t.Helper()
	cert, err := tls.LoadX509KeyPair(files["client.crt"], files["client.key"])
	require.NoError(t, err)
	pemCA, err := os.ReadFile(files["ca.crt"])
	require.NoError(t, err)
	pool := x509.NewCertPool()
	require.True(t, pool.AppendCertsFromPEM(pemCA))
	return &tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
}
