package server

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Limits that keep one request from taking the server down (SPEC §4.2: every non-watch request
// is answered within 5 s). The patch limits live in registry (limits.go). Each is documented
// in the README.

// maxSelectorBytes bounds a label or field selector (400 beyond). A selector is evaluated for
// every object a list or watch considers.
const maxSelectorBytes = 4096

// checkSelectorSizes refuses a labelSelector or fieldSelector longer than maxSelectorBytes.
func checkSelectorSizes(q map[string][]string) error {
	for _, name := range []string{"labelSelector", "fieldSelector"} {
		for _, v := range q[name] {
			if len(v) > maxSelectorBytes {
				return badRequest("%s is %d bytes long; the limit is %d", name, len(v), maxSelectorBytes)
			}
		}
	}
	return nil
}

// isWatch reports whether c is a watch: GET /watch, or a GET of a list route with watch=true
// (or 1) or of a /watch/ path of the Kubernetes API. A watch parameter on any other request (a
// POST, a GET of one object) makes it no watch, and one that is not a boolean is not a watch
// here either (the list handler answers it with a 400).
func isWatch(c *echo.Context) bool {
	r := c.Request()
	if r.Method != http.MethodGet {
		return false
	}
	if c.Path() == "/watch" {
		return true
	}
	if strings.Contains(c.Path(), "/watch/") {
		return true // a /watch/ path of the Kubernetes API
	}
	if !strings.HasSuffix(c.Path(), "/:resource") {
		return false
	}
	w, err := queryBool(r.URL.Query(), "watch")
	return w && err == nil
}

// isLongRunning reports whether c is exempt from MAX_INFLIGHT and the request deadline: a watch
// (which MAX_WATCHES bounds instead), the pprof profile and trace, or the stream of calls.
func isLongRunning(c *echo.Context) bool {
	switch c.Path() {
	case "/debug/pprof/profile", "/debug/pprof/trace", callsStreamPath:
		return c.Request().Method == http.MethodGet
	}
	return isWatch(c)
}

// eofReader remembers that its reader reached the end.
type eofReader struct {
	io.ReadCloser
	eof atomic.Bool
}

func (r *eofReader) Read(b []byte) (int, error) {
	n, err := r.ReadCloser.Read(b)
	if err == io.EOF {
		r.eof.Store(true)
	}
	return n, err
}

// Draining a body its handler did not read is bounded in time and size: a client still sending
// finishes within them (on loopback, megabytes take milliseconds), one that stopped is not waited
// for long.
const (
	drainWait = 250 * time.Millisecond
	drainMax  = 64 << 20
)

// drainBody reads and drops what is left of body, within drainWait and drainMax. It leaves the
// connection's read deadline at the end of that wait: the answer follows at once, and net/http
// closes the connection after it when the body did not end.
func drainBody(w http.ResponseWriter, body io.Reader) {
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(drainWait))
	_, _ = io.CopyN(io.Discard, body, drainMax)
}

// discardBody reads and drops what a watch request carries in its body, within the read
// deadline already set, so the stream that follows can lift it.
func discardBody(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody {
		return nil
	}
	_, err := io.Copy(io.Discard, r.Body)
	return bodyError(err)
}

// bodyError words a failure to read a request body: 413 beyond the body limit, 504 when the
// body did not arrive within the deadline, 400 otherwise.
func bodyError(err error) error {
	var maxErr *http.MaxBytesError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &maxErr):
		return err
	case errors.Is(err, os.ErrDeadlineExceeded):
		return apierrors.NewTimeoutError("the request body did not arrive within the request timeout", 0)
	}
	return badRequest("reading the request body: %v", err)
}

// acquireWatch takes one of MAX_WATCHES slots for an HTTP watch; a 429 when none is free. The
// limit middleware takes it for the whole request, so a watch a Fault delays holds its slot
// while it waits.
func (s *Server) acquireWatch() (release func(), err error) {
	if s.watches.Add(1) > int64(s.cfg.MaxWatches) {
		s.watches.Add(-1)
		return nil, apierrors.NewTooManyRequests(fmt.Sprintf("too many watches open (the limit is %d); please try again later", s.cfg.MaxWatches), 1)
	}
	return func() { s.watches.Add(-1) }, nil
}
