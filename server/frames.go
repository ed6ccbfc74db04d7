package server

import (
	"bytes"
	"encoding/json"
	"net/http"
	"sync"
	"time"
)

// frameWriter writes a streaming response (SSE or a Kubernetes watch) frame by frame, each
// write and flush under its own deadline, so a client that stops reading is cut off instead of
// holding the handler.
type frameWriter struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	timeout time.Duration
	buf     bytes.Buffer // reused for each frame; frames are written from one goroutine

	// mu orders the writer's deadline changes with a shutdown's (see cut).
	mu sync.Mutex
	// until, once shutdown began, caps every write deadline: a client that does not read by
	// then is cut off, and so is a write already blocked on it.
	until time.Time
}

func newFrameWriter(w http.ResponseWriter, timeout time.Duration) *frameWriter {
	return &frameWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

// deadline sets the write deadline for the next write: timeout from now, or the shutdown's
// cut-off if that is sooner.
func (fw *frameWriter) deadline() {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	d := time.Now().Add(fw.timeout)
	if !fw.until.IsZero() && fw.until.Before(d) {
		d = fw.until
	}
	_ = fw.rc.SetWriteDeadline(d)
}

// cut caps the stream's write deadlines at until, also for a write in progress. It is safe to
// call from another goroutine. The handler's last writes (the end of the response) still go
// out to a client that reads; one that does not is dropped at until.
func (fw *frameWriter) cut(until time.Time) {
	fw.mu.Lock()
	defer fw.mu.Unlock()
	fw.until = until
	_ = fw.rc.SetWriteDeadline(until)
}

func (fw *frameWriter) write(b []byte) error {
	fw.deadline()
	_, err := fw.w.Write(b)
	return err
}

func (fw *frameWriter) flush() error {
	fw.deadline()
	return fw.rc.Flush()
}

// jsonFrame writes head, v encoded as JSON, and tail as one frame, and flushes it.
func (fw *frameWriter) jsonFrame(head string, v any, tail string) error {
	obj, err := json.Marshal(v)
	if err != nil {
		return err
	}
	b := &fw.buf
	b.Reset()
	b.WriteString(head)
	b.Write(obj)
	b.WriteString(tail)
	if err := fw.write(b.Bytes()); err != nil {
		return err
	}
	return fw.flush()
}

// shutdownGrace is how long a stream gets, once shutdown begins, to take its last bytes.
const shutdownGrace = 500 * time.Millisecond

// openStream starts a streamed response on w and registers it, so BeginShutdown can cut it
// when its client stalls; close unregisters it.
func (s *Server) openStream(w http.ResponseWriter) (fw *frameWriter, close func()) {
	fw = newFrameWriter(w, s.cfg.WriteTimeout)
	s.streamsMu.Lock()
	defer s.streamsMu.Unlock()
	if s.shutting.Load() {
		fw.until = time.Now().Add(shutdownGrace)
	}
	s.streams[fw] = struct{}{}
	return fw, func() {
		s.streamsMu.Lock()
		delete(s.streams, fw)
		s.streamsMu.Unlock()
	}
}

// cutStreams gives every open stream shutdownGrace to finish writing.
func (s *Server) cutStreams() {
	until := time.Now().Add(shutdownGrace)
	s.streamsMu.Lock()
	defer s.streamsMu.Unlock()
	for fw := range s.streams {
		fw.cut(until)
	}
}
