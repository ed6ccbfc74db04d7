package testenv

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/opemu/opemu/certs"
)

// WebhookInstallOptions are the suite's admission webhook configurations and the serving
// certificate of its own webhook server, as envtest's WebhookInstallOptions: Start makes a CA
// and a serving certificate for LocalServingHost in LocalServingCertDir (tls.crt and tls.key,
// the names controller-runtime's webhook server reads), rewrites every webhook's clientConfig
// to call https://LocalServingHost:LocalServingPort with that CA as its caBundle (a service
// reference becomes a URL with its path, as envtest does), and installs the configurations
// before it returns. opemu calls them as a cluster would (SPEC §15).
//
// It serves the suite's conversion webhook too, as envtest's does: every CRD whose kind is
// convertible in the Scheme (or every CRD, with IgnoreSchemeConvertible) is converted by
// https://LocalServingHost:LocalServingPort/convert (controller-runtime's conversion
// webhook's path) with the CA as caBundle, and the conversion of every other CRD is removed
// (controller-gen writes a service reference that only a cluster could reach).
//
// Nothing is prepared when no configuration is given and no CRD is converted.
type WebhookInstallOptions struct {
	// Paths are directories or files of Validating- and MutatingWebhookConfigurations
	// (controller-gen's config/webhook/manifests.yaml); documents of other kinds are ignored.
	Paths []string
	// MutatingWebhooks and ValidatingWebhooks are configurations to install beside those read
	// from Paths. Start installs copies; Environment.WebhookInstallOptions holds them as
	// installed.
	MutatingWebhooks   []*admissionregistrationv1.MutatingWebhookConfiguration
	ValidatingWebhooks []*admissionregistrationv1.ValidatingWebhookConfiguration
	// IgnoreErrorIfPathMissing skips a path of Paths that does not exist instead of failing.
	IgnoreErrorIfPathMissing bool

	// LocalServingHost is the address the suite's webhook server listens on. Empty means
	// 127.0.0.1.
	LocalServingHost string
	// LocalServingPort is its port. Zero means a free port, chosen by Start.
	LocalServingPort int
	// LocalServingCertDir is where the serving certificate is written. Empty means a new
	// temporary directory, removed by Stop.
	LocalServingCertDir string
	// LocalServingCAData is the CA certificate (PEM) the serving certificate chains to: the
	// configurations' caBundle, and what a client of the webhook server trusts. Filled by Start.
	LocalServingCAData []byte
	// LocalServingHostExternalName, when set, is the host opemu calls instead of
	// LocalServingHost (the certificate names both).
	LocalServingHostExternalName string
	// IgnoreSchemeConvertible gives every CRD the local conversion webhook, whether its kind is
	// convertible in the Scheme or not (unstructured suites).
	IgnoreSchemeConvertible bool

	// tempDir is the directory prepare made, removed by cleanup.
	tempDir string
}

// prepare reads the configurations, makes the certificates, and returns the configurations to
// install, pointed at the local server. It fills o as envtest's PrepWithoutInstalling does.
// serving says the local server is needed whatever the configurations (a CRD converted by it).
func (o *WebhookInstallOptions) prepare(serving bool) ([]any, error) {
	mutating, validating, err := readWebhooks(o.Paths, !o.IgnoreErrorIfPathMissing)
	if err != nil {
		return nil, err
	}
	for _, m := range o.MutatingWebhooks {
		mutating = append(mutating, m.DeepCopy())
	}
	for _, v := range o.ValidatingWebhooks {
		validating = append(validating, v.DeepCopy())
	}
	o.MutatingWebhooks, o.ValidatingWebhooks = mutating, validating
	if len(mutating)+len(validating) == 0 && !serving {
		return nil, nil
	}

	if o.LocalServingHost == "" {
		o.LocalServingHost = "127.0.0.1"
	}
	if o.LocalServingPort == 0 {
		if o.LocalServingPort, err = freePort(o.LocalServingHost); err != nil {
			return nil, fmt.Errorf("testenv: a port for the webhook server: %w", err)
		}
	}
	if o.LocalServingCertDir == "" {
		if o.tempDir, err = os.MkdirTemp("", "testenv-serving-certs-"); err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		o.LocalServingCertDir = o.tempDir
	}
	hosts := []string{"localhost", o.LocalServingHost}
	if o.LocalServingHostExternalName != "" {
		hosts = append(hosts, o.LocalServingHostExternalName)
	}
	if err := o.writeCertificate(hosts); err != nil {
		_ = o.cleanup()
		return nil, fmt.Errorf("testenv: webhook serving certificate: %w", err)
	}

	hostPort := o.hostPort()
	objs := make([]any, 0, len(mutating)+len(validating))
	for _, m := range mutating {
		m.APIVersion, m.Kind = admissionregistrationv1.SchemeGroupVersion.String(), "MutatingWebhookConfiguration"
		for i := range m.Webhooks {
			o.pointAt(&m.Webhooks[i].ClientConfig, hostPort)
		}
		objs = append(objs, m)
	}
	for _, v := range validating {
		v.APIVersion, v.Kind = admissionregistrationv1.SchemeGroupVersion.String(), "ValidatingWebhookConfiguration"
		for i := range v.Webhooks {
			o.pointAt(&v.Webhooks[i].ClientConfig, hostPort)
		}
		objs = append(objs, v)
	}
	return objs, nil
}

// hostPort is where opemu calls the local webhook server.
func (o *WebhookInstallOptions) hostPort() string {
	host := o.LocalServingHost
	if o.LocalServingHostExternalName != "" {
		host = o.LocalServingHostExternalName
	}
	return net.JoinHostPort(host, strconv.Itoa(o.LocalServingPort))
}

// writeCertificate makes a CA and a serving certificate for hosts, writes the certificate and
// its key to LocalServingCertDir as tls.crt and tls.key, and keeps the CA in
// LocalServingCAData. (No fsync: the files live as long as the test.)
func (o *WebhookInstallOptions) writeCertificate(hosts []string) error {
	caPEM, certPEM, keyPEM, err := certs.Generate(hosts, time.Now())
	if err != nil {
		return err
	}
	if err := os.MkdirAll(o.LocalServingCertDir, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.LocalServingCertDir, certs.KeyFile), keyPEM, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.LocalServingCertDir, certs.CertFile), certPEM, 0o644); err != nil {
		return err
	}
	o.LocalServingCAData = caPEM
	return nil
}

// pointAt makes cc call the local webhook server: the CA as caBundle, and a service reference
// replaced by a URL with the service's path (a URL given is kept).
func (o *WebhookInstallOptions) pointAt(cc *admissionregistrationv1.WebhookClientConfig, hostPort string) {
	cc.CABundle = o.LocalServingCAData
	if cc.Service != nil {
		path := ""
		if cc.Service.Path != nil {
			path = *cc.Service.Path
		}
		u := "https://" + hostPort + "/" + strings.TrimPrefix(path, "/")
		cc.URL, cc.Service = &u, nil
	}
}

// cleanup removes the certificate directory prepare made.
func (o *WebhookInstallOptions) cleanup() error {
	if o.tempDir == "" {
		return nil
	}
	err := os.RemoveAll(o.tempDir)
	o.tempDir = ""
	return err
}

// handedOut are the ports freePort returned in this process: a port handed to one
// environment's webhook server is not handed to another's (the kernel may offer a port again
// once the probe that found it has closed it), as envtest remembers the ports it suggests.
var handedOut = struct {
	sync.Mutex
	ports map[int]bool
}{ports: map[int]bool{}}

// freePort returns a port of host that is free now and was not handed out before.
func freePort(host string) (int, error) {
	for range 100 {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		handedOut.Lock()
		taken := handedOut.ports[port]
		handedOut.ports[port] = true
		handedOut.Unlock()
		if !taken {
			return port, nil
		}
	}
	return 0, fmt.Errorf("no free port on %s after 100 tries", host)
}
