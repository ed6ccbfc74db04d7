package snapshot

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"time"

	"github.com/opemu/opemu/cache"
	"sigs.k8s.io/yaml"
)

// Format is how Write lays a snapshot's objects out. Both are YAML streams that kubectl apply
// -f takes and Read reads.
type Format string

const (
	// YAML writes each object as a YAML document, as kubectl get -o yaml shows it. The default.
	YAML Format = "yaml"
	// JSON writes each object as one line of JSON in its own document: smaller, and read back
	// several times faster (docs/PERFORMANCE.md), still a YAML stream (JSON is YAML).
	JSON Format = "json"
)

// ParseFormat returns the Format named name ("" is YAML).
func ParseFormat(name string) (Format, error) {
	switch Format(name) {
	case "", YAML:
		return YAML, nil
	case JSON:
		return JSON, nil
	}
	return "", fmt.Errorf("unknown snapshot format %q: want yaml or json", name)
}

// The header's lines, before the first document: comments, which kubectl ignores and Read
// reads back.
const (
	headerPrefix = "# opemu snapshot: "
	clockPrefix  = "# clock: "
)

// Write writes s to w in format f: the header (how many objects, the version they were read
// at, the clock), then one document per object in the file order (see order.go), each without
// metadata.resourceVersion and with its uid in UIDAnnotation.
func Write(w io.Writer, s *Snapshot, f Format) error {
	docs := make([]map[string]any, 0, s.Len())
	for _, o := range s.objects {
		doc, err := o.Decode()
		if err != nil {
			return fmt.Errorf("snapshot: %s: %w", o.Key(), err)
		}
		docs = append(docs, doc)
	}
	for _, d := range s.docs {
		docs = append(docs, maps.Clone(d))
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	fmt.Fprintf(bw, "%s%d objects at resourceVersion %d\n", headerPrefix, len(docs), s.ResourceVersion)
	if !s.Clock.IsZero() {
		mode := "real"
		if s.ManualClock {
			mode = "manual"
		}
		fmt.Fprintf(bw, "%s%s %s\n", clockPrefix, s.Clock.UTC().Format(time.RFC3339Nano), mode)
	}
	for _, doc := range order(docs) {
		raw, err := cache.EncodeJSON(fileForm(doc))
		if err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
		if f == YAML {
			if raw, err = yaml.JSONToYAML(raw); err != nil {
				return fmt.Errorf("snapshot: %w", err)
			}
		}
		bw.WriteString("---\n")
		bw.Write(raw)
		if f == JSON {
			bw.WriteByte('\n')
		}
	}
	return bw.Flush()
}

// fileForm is doc as a snapshot's file holds it: without metadata.resourceVersion (a restore
// gives versions of its own, and kubectl apply would take one as a precondition), its uid in
// UIDAnnotation. doc's metadata is replaced by a copy; nothing else of doc changes.
func fileForm(doc map[string]any) map[string]any {
	md, _ := doc["metadata"].(map[string]any)
	md = maps.Clone(md)
	if md == nil {
		return doc
	}
	delete(md, "resourceVersion")
	if uid, _ := md["uid"].(string); uid != "" {
		delete(md, "uid")
		ann, _ := md["annotations"].(map[string]any)
		ann = maps.Clone(ann)
		if ann == nil {
			ann = map[string]any{}
		}
		ann[UIDAnnotation] = uid
		md["annotations"] = ann
	}
	doc["metadata"] = md
	return doc
}
