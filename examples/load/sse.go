package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"
)

// sseFrame is one Server-Sent Events frame as opemu writes them (server/watch.go):
// "retry: N" first, then "id: <resourceVersion>" and "data: {"type":...,"object":{...}}" per
// change, ": ping" comments between, and an ERROR frame with an empty id when the watch ends
// for falling behind or cannot resume.
type sseFrame struct {
	Retry bool
	HasID bool
	ID    uint64
	// Error is set for a data line starting {"type":"ERROR" (found without parsing the JSON).
	Error bool
	// Data is the frame's data (lines joined by "\n") when the reader keeps data, else nil. It
	// is valid until the next call to next.
	Data []byte
}

// sseReader parses frames from a stream. It is not safe for concurrent use.
type sseReader struct {
	br *bufio.Reader
	// keepData makes next return Data; without it data lines are skipped, not copied, so a
	// client that only needs ids costs little more than the read itself.
	keepData bool
	data     []byte
}

func newSSEReader(r io.Reader, keepData bool) *sseReader {
	return &sseReader{br: bufio.NewReaderSize(r, 8<<10), keepData: keepData}
}

var errorPrefix = []byte(`{"type":"ERROR"`)

// next returns the next frame that has a field (comments alone are skipped). It returns the
// reader's error, io.EOF when the stream ends between frames, or io.ErrUnexpectedEOF when it
// ends inside one.
func (s *sseReader) next() (sseFrame, error) {
	var f sseFrame
	seen := false
	s.data = s.data[:0]
	for {
		line, err := s.br.ReadSlice('\n')
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			if errors.Is(err, io.EOF) && seen {
				err = io.ErrUnexpectedEOF
			}
			return f, err
		}
		long := err != nil // the line goes on beyond the buffer
		trimmed := bytes.TrimRight(line, "\r\n")
		if len(trimmed) == 0 && !long {
			if seen {
				if s.keepData {
					f.Data = s.data
				}
				return f, nil
			}
			continue
		}
		field, value, _ := bytes.Cut(trimmed, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		isData := string(field) == "data" // line and field are overwritten by the next read
		switch string(field) {
		case "": // a comment
		case "retry":
			f.Retry, seen = true, true
		case "id":
			f.HasID, seen = true, true
			if len(value) > 0 {
				if f.ID, err = strconv.ParseUint(string(value), 10, 64); err != nil {
					return f, fmt.Errorf("sse: bad id %q", value)
				}
			}
		case "data":
			seen = true
			f.Error = f.Error || bytes.HasPrefix(value, errorPrefix)
			if s.keepData {
				if len(s.data) > 0 {
					s.data = append(s.data, '\n')
				}
				s.data = append(s.data, value...)
			}
		}
		for long {
			line, err = s.br.ReadSlice('\n')
			if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
				if errors.Is(err, io.EOF) {
					err = io.ErrUnexpectedEOF
				}
				return f, err
			}
			long = err != nil
			if s.keepData && isData {
				s.data = append(s.data, bytes.TrimRight(line, "\r\n")...)
			}
		}
	}
}

// sseURL is opemu's SSE stream of the Applications of namespace ns.
func sseURL(target, ns string) string {
	return target + "/watch?" + url.Values{"kind": {"Application"}, "namespace": {ns}}.Encode()
}

// openSSE opens an SSE stream and reads up to its first frame, the retry frame, which opemu
// writes after registering the watcher: from then on no change is missed. The caller closes
// the returned body; ctx cancels the stream.
func openSSE(ctx context.Context, c *http.Client, u string, keepData bool) (io.ReadCloser, *sseReader, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	req.Header.Set("Accept", "text/event-stream")
	resp, err := c.Do(req)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		resp.Body.Close()
		return nil, nil, &statusError{http.MethodGet, u, resp.StatusCode, string(bytes.TrimSpace(b))}
	}
	r := newSSEReader(resp.Body, keepData)
	f, err := r.next()
	switch {
	case err != nil:
		resp.Body.Close()
		return nil, nil, fmt.Errorf("read the first frame of %s: %w", u, err)
	case !f.Retry:
		resp.Body.Close()
		return nil, nil, fmt.Errorf("%s: the first frame is not retry:", u)
	}
	return resp.Body, r, nil
}

// readFrames reads frames from rd until the stream ends or fails, giving each to each with when
// it was read (since base). It returns how many frames it read and why it stopped: nil at the
// stream's end, else the read's error, an ERROR frame's, or the one each returned.
func readFrames(rd *sseReader, base time.Time, each func(f sseFrame, at time.Duration) error) (int, error) {
	for n := 0; ; {
		f, err := rd.next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		at := time.Since(base)
		n++
		if f.Error {
			return n, fmt.Errorf("stream ended with an ERROR frame: %s", f.Data)
		}
		if err := each(f, at); err != nil {
			return n, err
		}
	}
}

// watchEvent is the part of a watch event's JSON the modes read.
type watchEvent struct {
	Type   string `json:"type"`
	Object struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
		Status struct {
			Phase      string `json:"phase"`
			Conditions []struct {
				Type   string `json:"type"`
				Status string `json:"status"`
			} `json:"conditions"`
		} `json:"status"`
	} `json:"object"`
}

// decode decodes f's data into ev, reusing its conditions' array.
func (ev *watchEvent) decode(f sseFrame) error {
	ev.Object.Status.Conditions = ev.Object.Status.Conditions[:0]
	if err := json.Unmarshal(f.Data, ev); err != nil {
		return fmt.Errorf("decode event %d: %w", f.ID, err)
	}
	return nil
}

// ready reports whether the object has the condition Ready=True.
func (ev *watchEvent) ready() bool {
	for _, c := range ev.Object.Status.Conditions {
		if c.Type == "Ready" && c.Status == "True" {
			return true
		}
	}
	return false
}

// notify puts a token in ch unless one is waiting there already.
func notify(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// stopStream ends a watch stream its caller opened: it cancels the request, closes body and
// waits for the stream's reader, which closes watched when it returns (readErr is then its
// error). It says why the stream ended before it was stopped, "" when it did not.
func stopStream(cancel context.CancelFunc, body io.Closer, watched <-chan struct{}, readErr func() error) string {
	early := false
	select {
	case <-watched:
		early = true
	default:
	}
	cancel()
	body.Close()
	<-watched
	if !early {
		return ""
	}
	if err := readErr(); err != nil {
		return err.Error()
	}
	return "stream ended"
}
