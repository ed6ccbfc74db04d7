package snapshot

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/internal/jsonfast"
	"github.com/opemu/opemu/internal/yamlsize"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Read reads a snapshot from r: opemu's header when there is one, then the objects of a YAML
// or JSON stream as kubectl apply -f reads a file: documents separated by "---" lines, JSON
// objects one after another, the items of a List. The objects are checked when restored
// (Objects), not here. A stream that is not made of objects is a 400 naming the document.
func Read(r io.Reader) (*Snapshot, error) { return ReadLimited(r, 0) }

// ReadLimited is Read of a stream from a client: its YAML documents with aliases may become at
// most maxExpanded bytes of JSON in all (0: no limit), a 413 beyond, refused before the aliases
// are expanded (package yamlsize).
func ReadLimited(r io.Reader, maxExpanded int) (*Snapshot, error) {
	s := &Snapshot{}
	budget := expansion{max: maxExpanded, left: maxExpanded}
	yr := utilyaml.NewYAMLReader(bufio.NewReaderSize(r, 64<<10))
	for n := 1; ; n++ {
		raw, err := yr.Read()
		if errors.Is(err, io.EOF) {
			return s, nil
		}
		if err != nil {
			return nil, badDocument(n, err)
		}
		if n == 1 {
			if err := s.readHeader(raw); err != nil {
				return nil, badDocument(n, err)
			}
		}
		if err := s.readDocument(raw, &budget); err != nil {
			if apierrors.IsRequestEntityTooLargeError(err) {
				return nil, err
			}
			return nil, badDocument(n, err)
		}
	}
}

func badDocument(n int, err error) error {
	return apierrors.NewBadRequest(fmt.Sprintf("snapshot: document %d: %v", n, err))
}

// readHeader reads opemu's header from the comment lines that open the stream.
func (s *Snapshot) readHeader(raw []byte) error {
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimRight(line, "\r")
		if !strings.HasPrefix(line, "#") {
			if strings.TrimSpace(line) == "" {
				continue
			}
			return nil
		}
		switch {
		case strings.HasPrefix(line, headerPrefix):
			// "<n> objects at resourceVersion <rv>"
			fields := strings.Fields(strings.TrimPrefix(line, headerPrefix))
			if len(fields) == 5 {
				s.ResourceVersion, _ = strconv.ParseUint(fields[4], 10, 64)
			}
		case strings.HasPrefix(line, clockPrefix):
			fields := strings.Fields(strings.TrimPrefix(line, clockPrefix))
			if len(fields) != 2 || (fields[1] != "manual" && fields[1] != "real") {
				return fmt.Errorf("the clock line must read %q, not %q", clockPrefix+"<RFC 3339 time> manual|real", line)
			}
			t, err := time.Parse(time.RFC3339Nano, fields[0])
			if err != nil {
				return fmt.Errorf("the clock line: %w", err)
			}
			s.Clock, s.ManualClock = t, fields[1] == "manual"
		}
	}
	return nil
}

// expansion is what a stream's YAML documents with aliases may still become (ReadLimited).
type expansion struct{ max, left int }

// take counts the YAML document raw against what is left; a 413 when it would pass it.
func (e *expansion) take(raw []byte) error {
	if e.max <= 0 {
		return nil
	}
	size, over := yamlsize.Measure(raw, e.left)
	if over {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf(
			"snapshot: the aliases of its YAML documents expand them to more than %d bytes of JSON", e.max))
	}
	e.left -= size
	return nil
}

// readDocument adds the objects of one document: a YAML document, or JSON objects; budget
// bounds what a YAML document's aliases may expand it to.
func (s *Snapshot) readDocument(raw []byte, budget *expansion) error {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return nil
	}
	if trimmed[0] == '{' {
		// One JSON object (a JSON snapshot's every document): the fast path, which fails on
		// anything after the object.
		if v, _, ok := jsonfast.Parse(trimmed); ok {
			if doc, isMap := v.(map[string]any); isMap {
				return s.add(doc)
			}
		}
		// Several JSON objects one after another (what kubectl apply also takes).
		d := json.NewDecoder(bytes.NewReader(trimmed))
		for d.More() {
			var one json.RawMessage
			if err := d.Decode(&one); err != nil {
				return err
			}
			doc, err := cache.DecodeJSON(one)
			if err != nil {
				return err
			}
			if err := s.add(doc); err != nil {
				return err
			}
		}
		return nil
	}
	if err := budget.take(raw); err != nil {
		return err
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return err
	}
	if string(bytes.TrimSpace(js)) == "null" {
		return nil // comments only
	}
	if len(js) == 0 || js[0] != '{' {
		return errors.New("not an object")
	}
	doc, err := cache.DecodeJSON(js)
	if err != nil {
		return err
	}
	return s.add(doc)
}

// add adds doc, or the items of a List.
func (s *Snapshot) add(doc map[string]any) error {
	kind, _ := doc["kind"].(string)
	if items, ok := doc["items"].([]any); ok && strings.HasSuffix(kind, "List") {
		for i, it := range items {
			item, ok := it.(map[string]any)
			if !ok {
				return fmt.Errorf("%s item %d is not an object", kind, i)
			}
			s.docs = append(s.docs, item)
		}
		return nil
	}
	s.docs = append(s.docs, doc)
	return nil
}
