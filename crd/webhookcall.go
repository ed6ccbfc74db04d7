package crd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"

	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/rest"
)

// The outgoing call of conversion webhooks.
//
// A CRD makes opemu POST ConversionReviews to the URL it names: any address opemu's host
// reaches, chosen by whoever may write CRDs. apiextensions-apiserver's converter quotes its
// REST client's error in the error of the read or write (`conversion webhook for <gvk> failed:
// <err>`), and that error carries how the connection failed and the body of a non-2xx answer.
// So the transport under that client (reporting) keeps both out of it, as package hooks does for
// reconcile hooks and admission webhooks (hooks/outcall.go, which crd, below hooks, cannot
// import): a connection failure or an answer that is too large or not a ConversionReview is a
// fixed reason; a non-2xx answer reaches the client with its status and an empty body. The cause
// and the start of the answer go to opemu's log. A Failure result's message is the webhook's
// own and stays.

// maxReviewBytes bounds a conversion webhook's answer, as hooks bounds a webhook's.
const maxReviewBytes = 3 << 20

// reportingResolver wraps the rest.Config of every conversion webhook's client with reporting.
func reportingResolver(log *slog.Logger) webhook.AuthenticationInfoResolverWrapper {
	return func(next webhook.AuthenticationInfoResolver) webhook.AuthenticationInfoResolver {
		wrap := func(cfg *rest.Config, err error) (*rest.Config, error) {
			if err != nil {
				return nil, err
			}
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return &reporting{next: rt, log: log} })
			return cfg, nil
		}
		return &webhook.AuthenticationInfoResolverDelegator{
			ClientConfigForFunc: func(hostPort string) (*rest.Config, error) { return wrap(next.ClientConfigFor(hostPort)) },
			ClientConfigForServiceFunc: func(name, namespace string, port int) (*rest.Config, error) {
				return wrap(next.ClientConfigForService(name, namespace, port))
			},
		}
	}
}

// reporting is the transport of a conversion webhook's REST client: its errors and answers
// carry nothing the other end said beyond a ConversionReview.
type reporting struct {
	next http.RoundTripper
	log  *slog.Logger
}

var (
	errNoAnswer = errors.New("no answer (opemu's log has the cause)")
	errTooLarge = fmt.Errorf("the answer is larger than %d bytes", maxReviewBytes)
	errNotKnown = errors.New("the answer is not a ConversionReview (opemu's log has it)")
)

// RoundTrip returns errors that http.Client quotes after `Post "<url>": `; the request's
// context ending first is that context's error.
func (r *reporting) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err != nil {
		return nil, r.failed(req, "the call failed", 0, err, nil)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxReviewBytes+1))
	switch {
	case err != nil:
		return nil, r.failed(req, "the call failed", resp.StatusCode, err, raw)
	case len(raw) > maxReviewBytes:
		r.logFailure(req, "the answer is too large", resp.StatusCode, nil, nil)
		return nil, errTooLarge
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		r.logFailure(req, "the answer is not 2xx", resp.StatusCode, nil, raw)
		raw = nil // the client reports the status alone
	case !isReview(raw):
		r.logFailure(req, "the answer is not a ConversionReview", resp.StatusCode, nil, raw)
		return nil, errNotKnown
	}
	out := *resp
	out.Body, out.ContentLength = io.NopCloser(bytes.NewReader(raw)), int64(len(raw))
	out.Header = resp.Header.Clone()
	out.Header.Del("Content-Length")
	if raw == nil {
		out.Header.Del("Content-Type") // no Status body to decode
	}
	return &out, nil
}

// isReview says raw is a JSON object that may be a ConversionReview the converter decodes: its
// kind and apiVersion, when given, are those of one (missing, the converter's defaults fill
// them), so that the decoder's errors, which quote them, name nothing else.
func isReview(raw []byte) bool {
	var tm struct{ APIVersion, Kind string }
	if json.Unmarshal(raw, &tm) != nil || (tm.Kind != "" && tm.Kind != "ConversionReview") {
		return false
	}
	switch tm.APIVersion {
	case "", "apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1":
		return true
	}
	return false
}

// failed logs a call that got no whole answer and returns one fixed reason whatever the cause
// (refused, reset, not TLS, not HTTP, a certificate not trusted), so that no error tells one
// port from another.
func (r *reporting) failed(req *http.Request, msg string, code int, cause error, raw []byte) error {
	if err := req.Context().Err(); err != nil {
		return err
	}
	r.logFailure(req, msg, code, cause, raw)
	if code != 0 {
		return fmt.Errorf("HTTP %d, and the answer could not be read (opemu's log has the cause)", code)
	}
	return errNoAnswer
}

// logFailure logs a failed call with its cause and the first 200 bytes of the answer.
func (r *reporting) logFailure(req *http.Request, msg string, code int, cause error, raw []byte) {
	attrs := []any{"url", req.URL.String()}
	if code != 0 {
		attrs = append(attrs, "status", code)
	}
	if cause != nil {
		attrs = append(attrs, "err", cause)
	}
	if raw != nil {
		attrs = append(attrs, "answer", snippet(raw))
	}
	r.log.Warn("calling the conversion webhook: "+msg, attrs...)
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
