package suitetest

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"time"
)

// WaitForWebhookServer waits until the webhook server at addr accepts TLS connections (or the
// manager stopped), as kubebuilder's suites do before their first test.
func WaitForWebhookServer(addr string, stopped <-chan error) error {
	deadline := time.Now().Add(10 * time.Second)
	dialer := &net.Dialer{Timeout: time.Second}
	for {
		conn, err := tls.DialWithDialer(dialer, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // only whether it serves
		if err == nil {
			return conn.Close()
		}
		select {
		case err := <-stopped:
			return fmt.Errorf("the manager stopped: %w", errors.Join(err, errors.New("before its webhook server served")))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the webhook server at %s did not serve within 10s: %w", addr, err)
		}
	}
}
