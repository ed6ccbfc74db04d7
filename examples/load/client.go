package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"
)

// appsURL is the Applications collection of namespace ns on target.
func appsURL(target, ns string) string {
	return target + "/apis/cloudnative.elide.dev/v1/namespaces/" + ns + "/applications"
}

// createNamespace creates the namespace ns on target, as a client must on a cluster before it
// writes into it; one that exists already is fine.
func createNamespace(ctx context.Context, c *http.Client, target, ns string) error {
	body := []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"` + ns + `"}}`)
	_, err := do(ctx, c, http.MethodPost, target+"/api/v1/namespaces", "application/json", body, false)
	if se := (*statusError)(nil); errors.As(err, &se) && se.code == http.StatusConflict {
		return nil
	}
	return err
}

// newClient returns a client for conns workers that each send one request at a time: one
// Transport keeps up to conns idle connections per host, so every worker reuses its own
// keep-alive connection. Compression is off so opemu and the baseline are compared on the same
// bytes. timeout bounds each request; zero means none (streams).
func newClient(conns int, timeout time.Duration) *http.Client {
	return &http.Client{Transport: newTransport(conns, nil), Timeout: timeout}
}

// newTransport is newClient's Transport; tlsConf (nil: the system's roots) is used for https
// URLs. It speaks HTTP/1.1 even over TLS (a custom dialer turns off Go's HTTP/2), so every
// server is measured on one keep-alive connection per worker.
func newTransport(conns int, tlsConf *tls.Config) *http.Transport {
	return &http.Transport{
		Proxy:               nil,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        conns + 8,
		MaxIdleConnsPerHost: conns + 8,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		TLSClientConfig:     tlsConf,
	}
}

// newTargetClient is newClient for a server that wants a bearer token (empty: none) and, over
// https, trusts roots (nil: the system's).
func newTargetClient(conns int, timeout time.Duration, roots *x509.CertPool, token string) *http.Client {
	var rt http.RoundTripper = newTransport(conns, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12})
	if token != "" {
		rt = bearer{rt: rt, header: "Bearer " + token}
	}
	return &http.Client{Transport: rt, Timeout: timeout}
}

// bearer adds an Authorization header to every request it sends.
type bearer struct {
	rt     http.RoundTripper
	header string
}

func (b bearer) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context()) // a RoundTripper must not change the caller's request
	req.Header.Set("Authorization", b.header)
	return b.rt.RoundTrip(req)
}

// CloseIdleConnections lets closeClient reach the Transport underneath.
func (b bearer) CloseIdleConnections() {
	if c, ok := b.rt.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// loadRoots reads PEM certificates from files into a pool; no files give nil (the system's).
func loadRoots(files []string) (*x509.CertPool, error) {
	if len(files) == 0 {
		return nil, nil
	}
	pool := x509.NewCertPool()
	for _, f := range files {
		pem, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no PEM certificate", f)
		}
	}
	return pool, nil
}

// closeClient closes c's idle connections; the caller has finished with it.
func closeClient(c *http.Client) { c.CloseIdleConnections() }

// statusError is a non-2xx answer, with the start of its body.
type statusError struct {
	method, url string
	code        int
	body        string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("%s %s: %d %s", e.method, e.url, e.code, e.body)
}

// do sends one request and reads the whole answer, so the connection can be reused. It
// returns the body when keep is set, and a *statusError for a non-2xx answer.
func do(ctx context.Context, c *http.Client, method, url, ctype string, body []byte, keep bool) ([]byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return nil, err
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil, &statusError{method, url, resp.StatusCode, string(bytes.TrimSpace(b))}
	}
	if keep {
		return io.ReadAll(resp.Body)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	return nil, err
}

// appBody is an Application as the load tool creates and replaces it.
func appBody(name, ns string, replicas int) []byte {
	b := make([]byte, 0, 192)
	b = append(b, `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"`...)
	b = append(b, name...)
	b = append(b, `","namespace":"`...)
	b = append(b, ns...)
	b = append(b, `"},"spec":{"replicas":`...)
	b = strconv.AppendInt(b, int64(replicas), 10)
	return append(b, `,"image":"nginx:1.27"}}`...)
}

// readServerCPU reads the CPU the server at target has used so far from
// process_cpu_seconds_total on its /metrics (opemu's process collector, the baseline's own
// line, kube-apiserver's), through c (nil: a plain client of its own); ok is false when it cannot be read, or there is no HTTP server to ask (target empty:
// the raw etcd puts of the etcd mode). The counter's resolution is the kernel's clock tick
// (10 ms).
func readServerCPU(ctx context.Context, c *http.Client, target string) (cpu time.Duration, ok bool) {
	if target == "" {
		return 0, false
	}
	s, err := processCPUSeconds(ctx, c, target+"/metrics")
	if err != nil {
		return 0, false
	}
	return time.Duration(s * float64(time.Second)), true
}
