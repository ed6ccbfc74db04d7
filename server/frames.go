package server

import (
	"bytes"
	"encoding/json"
	"net/http"
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
}

func newFrameWriter(w http.ResponseWriter, timeout time.Duration) frameWriter {
	return frameWriter{w: w, rc: http.NewResponseController(w), timeout: timeout}
}

func (fw *frameWriter) write(b []byte) error {
	_ = fw.rc.SetWriteDeadline(time.Now().Add(fw.timeout))
	_, err := fw.w.Write(b)
	return err
}

func (fw *frameWriter) flush() error {
	_ = fw.rc.SetWriteDeadline(time.Now().Add(fw.timeout))
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
