package hooks

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"time"
)

// The outgoing call of reconcile hooks and admission webhooks.
//
// A Controller or a webhook configuration makes opemu POST to the URL it names: any address
// opemu's host reaches, chosen by whoever may write those objects. So what a failed call reports
// through the API (the writer's error, Events, conditions, /history) never carries what the
// other end said, nor how the connection failed: a fixed reason, and the HTTP status code when
// there was one, as kube-apiserver's client reports a status without a Status body. Otherwise
// the reports would read out any local service's answers and tell which ports are open. The
// cause and the start of the answer go to opemu's log, for whoever runs it.

// callee is one URL that opemu calls.
type callee struct {
	// what names the callee in reports: "the hook", "the webhook".
	what string
	url  string
	// client does not follow redirects (a 3xx is a failed call) and uses no proxy.
	client *http.Client
	// timeout bounds the whole call, the answer's body included; timeoutField names the
	// setting that sets it.
	timeout      time.Duration
	timeoutField string
	// limit bounds the answer's body.
	limit int64
	log   *slog.Logger
	// logAttrs identify the callee in the log (the Controller, the webhook and its configuration).
	logAttrs []any
}

// newClient is the HTTP client of a hook or webhook: HTTP/2 when the server offers it, no proxy,
// no redirects, and, with a caBundle, only servers that it signed.
func newClient(caBundle []byte, idlePerHost int) (*http.Client, error) {
	tr := &http.Transport{ForceAttemptHTTP2: true, MaxIdleConnsPerHost: idlePerHost, IdleConnTimeout: 90 * time.Second}
	if len(caBundle) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, errors.New("holds no PEM certificate")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}, nil
}

// post sends body (JSON) to the callee and returns the body of its 2xx answer. Its errors are
// fit for the API (`Post "<url>": ` and a fixed reason, with the status code of an answer);
// the cause is logged. ctx ending first returns ctx's error.
func (c callee) post(ctx context.Context, body []byte) ([]byte, error) {
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, c.failed(ctx, cctx, err, 0, nil)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, c.limit+1))
	if err != nil {
		return nil, c.failed(ctx, cctx, err, resp.StatusCode, raw)
	}
	if int64(len(raw)) > c.limit {
		c.logFailure("the answer is too large", resp.StatusCode, nil, nil)
		return nil, fmt.Errorf("Post %q: the answer is larger than %d bytes", c.url, c.limit)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		c.logFailure("the answer is not 2xx", resp.StatusCode, nil, raw)
		return nil, fmt.Errorf("Post %q: HTTP %d %s", c.url, resp.StatusCode, http.StatusText(resp.StatusCode))
	}
	return raw, nil
}

// failed is the reported error of a call that got no whole answer: the time ran out, or one
// fixed reason whatever the cause (refused, reset, not TLS, not HTTP, a certificate not
// trusted), so that no report tells one port from another.
func (c callee) failed(ctx, cctx context.Context, cause error, code int, raw []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if cctx.Err() != nil {
		c.logFailure("no answer in time", code, cause, raw)
		return fmt.Errorf("Post %q: no answer within %v (%s)", c.url, c.timeout, c.timeoutField)
	}
	c.logFailure("the call failed", code, cause, raw)
	if code != 0 {
		return fmt.Errorf("Post %q: HTTP %d, and the answer could not be read (opemu's log has the cause)", c.url, code)
	}
	return fmt.Errorf("Post %q: no answer (opemu's log has the cause)", c.url)
}

// logFailure logs a failed call with its cause and the start of the answer.
func (c callee) logFailure(msg string, code int, cause error, raw []byte) {
	attrs := append([]any{"url", c.url}, c.logAttrs...)
	if code != 0 {
		attrs = append(attrs, "status", code)
	}
	if cause != nil {
		attrs = append(attrs, "err", cause)
	}
	if raw != nil {
		attrs = append(attrs, "answer", snippet(raw))
	}
	c.log.Warn("calling "+c.what+": "+msg, attrs...)
}

// undecodable is the reported reason of a 2xx answer that does not decode (err, from
// encoding/json) into what was expected: what the decoder said about its shape (not JSON, a
// field of the wrong type, a field not known), never its content. A field not known is named
// only when its name looks like a field's (a misspelt one, which the callee's author needs to
// see). The answer is logged.
func (c callee) undecodable(raw []byte, err error) error {
	c.logFailure("the answer does not decode", 0, err, raw)
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syn), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return errors.New("not JSON")
	case errors.As(err, &typ) && typ.Field != "":
		return fmt.Errorf("%s is a JSON %s", typ.Field, typ.Value)
	case errors.As(err, &typ):
		return fmt.Errorf("a JSON %s", typ.Value)
	case errors.Is(err, errMoreThanOne):
		return err
	}
	if m := unknownField.FindStringSubmatch(err.Error()); m != nil {
		if fieldName.MatchString(m[1]) {
			return fmt.Errorf("unknown field %q", m[1])
		}
		return errors.New("a field that is not known")
	}
	return errors.New("not what was expected (opemu's log has the cause)")
}

// snippet is the start of an answer, for the log.
func snippet(b []byte) string {
	const max = 200
	b = bytes.TrimSpace(b)
	if len(b) > max {
		return string(b[:max]) + "..."
	}
	if len(b) == 0 {
		return "(empty body)"
	}
	return string(b)
}

var (
	// unknownField is encoding/json's error for a field DisallowUnknownFields refuses.
	unknownField = regexp.MustCompile(`^json: unknown field "(.*)"$`)
	// fieldName is what a field's name looks like.
	fieldName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_]{0,39}$`)
)
