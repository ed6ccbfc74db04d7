package server

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"unicode"
	"unicode/utf8"

	"github.com/labstack/echo/v5"
	utilnet "k8s.io/apimachinery/pkg/util/net"
)

// Warnings reach the client as kube-apiserver's recorder of warnings sends them
// (k8s.io/apiserver's endpoints/filters WithWarningRecorder, on every request): one Warning
// header per distinct message, "299 - "<text>"", at most 4,096 characters of text in all. The
// warning that would pass that turns truncation on: every message so far is sent again cut to
// 256 characters, and later ones, cut too, only while the total is under 4,096. So 150,000
// unknown fields answer about 4 KB of headers, not the 7.2 MB that clients failed to read.
//
// The recorder is mirrored, limits and order exactly, rather than imported: it is unexported
// in a package that would bring kube-apiserver's authentication, audit and streaming code
// (and a module, k8s.io/streaming) into the binary for these sixty lines.
const (
	// warningsTotalRunes is kube-apiserver's truncateAtTotalRunes.
	warningsTotalRunes = 4 * 1024
	// warningItemRunes is kube-apiserver's truncateItemRunes.
	warningItemRunes = 256
)

// warningsKey is where a request's warningRecorder is kept in its echo.Context.
const warningsKey = "opemu.warnings"

// warningHeaders keeps the Warning header of each text a server has sent, so the warnings every
// write of a kind repeats (an Application without resource limits) are formatted once, not on
// each request. It keeps at most maxWarningHeaders texts, the first ones, of at most
// warningItemRunes bytes: the rest are formatted each time, so texts a client's requests vary
// (unknown field names) cannot grow it much.
// The zero value is ready; it is safe for concurrent use.
type warningHeaders struct {
	byText sync.Map // text -> its header value
	kept   atomic.Int32
}

// maxWarningHeaders bounds a warningHeaders.
const maxWarningHeaders = 256

// of is the Warning header of text (code 299, no agent), as utilnet.NewWarningHeader makes it.
func (h *warningHeaders) of(text string) (string, error) {
	if v, ok := h.byText.Load(text); ok {
		return v.(string), nil
	}
	header, err := utilnet.NewWarningHeader(299, "", text)
	if err == nil && len(text) <= warningItemRunes && h.kept.Load() < maxWarningHeaders {
		if _, loaded := h.byText.LoadOrStore(text, header); !loaded {
			h.kept.Add(1)
		}
	}
	return header, err
}

// warningRecorder is one request's warnings, written to its response's headers as they come.
// Handlers of one request add them from its goroutine only.
type warningRecorder struct {
	header  http.Header
	headers *warningHeaders
	// recorded are the messages sent, each once; nil until a second one comes (ordered holds
	// the first).
	recorded map[string]bool
	// ordered are the messages in the order they came, to send again cut once truncating.
	ordered []string
	// written is how many characters of text the headers carry.
	written    int
	truncating bool
}

// setWarnings records each message as a warning of the request, before its answer is written.
func (s *Server) setWarnings(c *echo.Context, warnings []string) {
	if len(warnings) == 0 {
		return
	}
	r, _ := c.Get(warningsKey).(*warningRecorder)
	if r == nil {
		r = &warningRecorder{header: c.Response().Header(), headers: &s.warningHeaders}
		c.Set(warningsKey, r)
	}
	for _, w := range warnings {
		r.add(warningText(w))
	}
}

// add records text as kube-apiserver's recorder's AddWarning does.
func (r *warningRecorder) add(text string) {
	if text == "" || (r.written >= warningsTotalRunes && r.truncating) || r.seen(text) {
		return
	}
	r.ordered = append(r.ordered, text)
	runes := utf8.RuneCountInString(text)
	if r.truncating && runes > warningItemRunes {
		text, runes = cutRunes(text), warningItemRunes
	}
	header, err := r.headers.of(text)
	if err != nil {
		return
	}
	if r.written+runes <= warningsTotalRunes || r.truncating {
		r.written += runes
		r.header.Add("Warning", header)
		return
	}
	// Past the total: truncate from now on, and send what came so far again, cut.
	r.truncating, r.written = true, 0
	r.header.Del("Warning")
	for _, text := range r.ordered {
		runes := utf8.RuneCountInString(text)
		if runes > warningItemRunes {
			text, runes = cutRunes(text), warningItemRunes
		}
		if header, err := r.headers.of(text); err == nil {
			r.written += runes
			r.header.Add("Warning", header)
		}
	}
}

// seen reports whether text was recorded already, and remembers it if not (the caller then
// appends it to ordered). The first text needs no map: it is ordered[0].
func (r *warningRecorder) seen(text string) bool {
	if len(r.ordered) == 0 {
		return false
	}
	if r.recorded == nil {
		if r.ordered[0] == text {
			return true
		}
		r.recorded = map[string]bool{r.ordered[0]: true}
	}
	if r.recorded[text] {
		return true
	}
	r.recorded[text] = true
	return false
}

// cutRunes is text's first warningItemRunes characters.
func cutRunes(text string) string { return string([]rune(text)[:warningItemRunes]) }

// warningText is msg as a warning may carry it: control characters (for which the recorder
// drops a warning) become spaces, invalid UTF-8 U+FFFD.
func warningText(msg string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, msg)
}
