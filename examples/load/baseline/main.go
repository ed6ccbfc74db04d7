// Command baseline is the yardstick for the load tool (SPEC §10): a bare net/http server that
// keeps Application objects as JSON bytes in maps behind one RWMutex and serves them at
// opemu's paths, with the same object shape. It does what any real server must do per request
// (decode the body, stamp metadata, encode, store, answer) and nothing more: no admission,
// schema, watch, events or namespaces (a Namespace POSTed, as the load tool does before it
// writes into one, is answered and forgotten). PATCH takes a JSON merge patch (RFC 7386) of the
// stored object.
// GET /metrics reports the process's own CPU as process_cpu_seconds_total, as opemu's /metrics
// does, so the load tool can put the server's CPU per operation beside opemu's.
//
//	go run ./examples/load/baseline -addr 127.0.0.1:3001
package main

import (
	"bytes"
	"cmp"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"
)

const (
	apiVersion = "cloudnative.elide.dev/v1"
	collection = "/apis/cloudnative.elide.dev/v1/namespaces/{ns}/applications"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:3001", "listen address")
	flag.Parse()
	log.Printf("baseline listening on %s", *addr)
	log.Fatal(http.ListenAndServe(*addr, newHandler()))
}

// entry is one stored object: its encoded JSON (never modified once stored) and the metadata
// an update must carry over.
type entry struct {
	raw     []byte
	uid     string
	created string
}

type store struct {
	mu sync.RWMutex // guards objects and rv
	// objects is namespace -> name -> entry, so listing one namespace costs its own size.
	objects map[string]map[string]entry
	rv      uint64
}

// newHandler returns the baseline's routes (Go 1.22 ServeMux patterns).
func newHandler() http.Handler {
	s := &store{objects: map[string]map[string]entry{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	mux.HandleFunc("POST /api/v1/namespaces", func(w http.ResponseWriter, r *http.Request) {
		if obj, _, ok := decode(w, r); ok {
			raw, _ := json.Marshal(obj)
			writeJSON(w, http.StatusCreated, raw)
		}
	})
	mux.HandleFunc("POST "+collection, s.create)
	mux.HandleFunc("GET "+collection, s.list)
	mux.HandleFunc("GET "+collection+"/{name}", s.get)
	mux.HandleFunc("PUT "+collection+"/{name}", s.update)
	mux.HandleFunc("PATCH "+collection+"/{name}", s.patch)
	mux.HandleFunc("GET /metrics", metrics)
	return mux
}

func (s *store) create(w http.ResponseWriter, r *http.Request) {
	ns := r.PathValue("ns")
	obj, meta, ok := decode(w, r)
	if !ok {
		return
	}
	name, _ := meta["name"].(string)
	if name == "" {
		writeStatus(w, http.StatusBadRequest, "metadata.name is required")
		return
	}
	e := entry{uid: newUID(), created: time.Now().UTC().Format(time.RFC3339)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, exists := s.objects[ns][name]; exists {
		writeStatus(w, http.StatusConflict, fmt.Sprintf("applications %q already exists", name))
		return
	}
	raw, err := s.stampLocked(obj, meta, ns, e)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, err.Error())
		return
	}
	e.raw = raw
	if s.objects[ns] == nil {
		s.objects[ns] = map[string]entry{}
	}
	s.objects[ns][name] = e
	writeJSON(w, http.StatusCreated, raw)
}

func (s *store) update(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	obj, meta, ok := decode(w, r)
	if !ok {
		return
	}
	if n, _ := meta["name"].(string); n != "" && n != name {
		writeStatus(w, http.StatusBadRequest, "metadata.name does not match the path")
		return
	}
	meta["name"] = name
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.objects[ns][name]
	if !exists {
		writeStatus(w, http.StatusNotFound, fmt.Sprintf("applications %q not found", name))
		return
	}
	raw, err := s.stampLocked(obj, meta, ns, old)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, err.Error())
		return
	}
	old.raw = raw
	s.objects[ns][name] = old
	writeJSON(w, http.StatusOK, raw)
}

// patch applies a JSON merge patch to the stored object and stores the result, as an update.
func (s *store) patch(w http.ResponseWriter, r *http.Request) {
	ns, name := r.PathValue("ns"), r.PathValue("name")
	var p map[string]any
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 3<<20)).Decode(&p); err != nil || p == nil {
		writeStatus(w, http.StatusBadRequest, "body must be a JSON merge patch object")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old, exists := s.objects[ns][name]
	if !exists {
		writeStatus(w, http.StatusNotFound, fmt.Sprintf("applications %q not found", name))
		return
	}
	var obj map[string]any
	if err := json.Unmarshal(old.raw, &obj); err != nil {
		writeStatus(w, http.StatusInternalServerError, err.Error())
		return
	}
	obj, _ = mergePatch(obj, p).(map[string]any)
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	meta["name"] = name
	raw, err := s.stampLocked(obj, meta, ns, old)
	if err != nil {
		writeStatus(w, http.StatusBadRequest, err.Error())
		return
	}
	old.raw = raw
	s.objects[ns][name] = old
	writeJSON(w, http.StatusOK, raw)
}

// mergePatch returns target with patch merged in (RFC 7386): a null removes a member, an
// object merges recursively, anything else replaces.
func mergePatch(target, patch any) any {
	p, ok := patch.(map[string]any)
	if !ok {
		return patch
	}
	t, ok := target.(map[string]any)
	if !ok {
		t = map[string]any{}
	}
	for k, v := range p {
		if v == nil {
			delete(t, k)
		} else {
			t[k] = mergePatch(t[k], v)
		}
	}
	return t
}

// metrics reports the CPU this process has used, in the Prometheus text format.
func metrics(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	fmt.Fprintf(w, "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %g\n", processCPU().Seconds())
}

// stampLocked sets the server-owned metadata, bumps the resourceVersion and encodes obj. The
// encoding happens under the lock so resourceVersions are stored in order, as in a real store.
func (s *store) stampLocked(obj, meta map[string]any, ns string, e entry) ([]byte, error) {
	s.rv++
	meta["namespace"] = ns
	meta["uid"] = e.uid
	meta["creationTimestamp"] = e.created
	meta["resourceVersion"] = strconv.FormatUint(s.rv, 10)
	return json.Marshal(obj)
}

func (s *store) get(w http.ResponseWriter, r *http.Request) {
	s.mu.RLock()
	e, ok := s.objects[r.PathValue("ns")][r.PathValue("name")]
	s.mu.RUnlock()
	if !ok {
		writeStatus(w, http.StatusNotFound, fmt.Sprintf("applications %q not found", r.PathValue("name")))
		return
	}
	writeJSON(w, http.StatusOK, e.raw)
}

// list answers the namespace's objects sorted by name, as Kubernetes lists are; ?limit=N
// keeps the first N (no continue token).
func (s *store) list(w http.ResponseWriter, r *http.Request) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	type item struct {
		name string
		raw  []byte
	}
	s.mu.RLock()
	objs := s.objects[r.PathValue("ns")]
	items := make([]item, 0, len(objs))
	for name, e := range objs {
		items = append(items, item{name, e.raw})
	}
	rv := s.rv
	s.mu.RUnlock()
	slices.SortFunc(items, func(a, b item) int { return cmp.Compare(a.name, b.name) })
	if limit > 0 && limit < len(items) {
		items = items[:limit]
	}
	size := 128
	for _, it := range items {
		size += len(it.raw) + 1
	}
	b := bytes.NewBuffer(make([]byte, 0, size))
	b.WriteString(`{"apiVersion":"` + apiVersion + `","kind":"ApplicationList","metadata":{"resourceVersion":"`)
	b.WriteString(strconv.FormatUint(rv, 10))
	b.WriteString(`"},"items":[`)
	for i, it := range items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(it.raw)
	}
	b.WriteString("]}")
	writeJSON(w, http.StatusOK, b.Bytes())
}

// decode reads the body as a JSON object with a metadata object; on failure it answers 400
// and returns ok false.
func decode(w http.ResponseWriter, r *http.Request) (obj, meta map[string]any, ok bool) {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 3<<20)).Decode(&obj); err != nil || obj == nil {
		writeStatus(w, http.StatusBadRequest, "body must be a JSON object")
		return nil, nil, false
	}
	meta, _ = obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	return obj, meta, true
}

func writeJSON(w http.ResponseWriter, code int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(body)
}

// writeStatus answers a minimal Kubernetes Status.
func writeStatus(w http.ResponseWriter, code int, msg string) {
	body, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "Status", "status": "Failure",
		"message": msg, "code": code})
	writeJSON(w, code, body)
}

func newUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
