package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The soak: writers churn Applications (create, spec and label changes, delete) while many
// watchers of both protocols follow, some through a label selector, some dropping their
// connection and resuming from their last version again and again. Afterwards every watcher's
// events are checked against the watch guarantees (SPEC §5.2): the same events for all, in
// strictly increasing versions, every write that returned a version among them, resumes exact,
// selectors with their ADDED/DELETED transitions, and the replay equal to the final list; no
// 5xx anywhere. CI runs it for 20 s; OPEMU_SOAK=10m runs it longer (docs/RELIABILITY.md).

// soakEvent is one delivered event.
type soakEvent struct {
	Type string
	Name string
	RV   uint64
	Tier string // the object's tier label
}

func (e soakEvent) String() string { return fmt.Sprintf("%s %s@%d", e.Type, e.Name, e.RV) }

// soakWatcher follows Applications with one protocol from a version, optionally with the
// selector tier=a, optionally reconnecting every so often from the last version it saw.
type soakWatcher struct {
	name     string
	sse      bool
	selector bool
	resume   bool

	mu      sync.Mutex
	events  []soakEvent
	resumes int
	err     error
}

func (w *soakWatcher) last() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.events) == 0 {
		return 0
	}
	return w.events[len(w.events)-1].RV
}

// run follows the stream until ctx ends, reconnecting after every few events when resume is set.
func (w *soakWatcher) run(ctx context.Context, addr string, from uint64, rng *rand.Rand) {
	rv := from
	for ctx.Err() == nil {
		n, err := w.follow(ctx, addr, rv, func() int {
			if w.resume {
				return 20 + rng.IntN(60)
			}
			return -1
		}())
		if err != nil && ctx.Err() == nil {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			return
		}
		if n > 0 {
			rv = w.last()
		}
		if ctx.Err() == nil {
			w.mu.Lock()
			w.resumes++
			w.mu.Unlock()
		}
	}
}

type wireObject struct {
	Metadata struct {
		Name            string            `json:"name"`
		ResourceVersion string            `json:"resourceVersion"`
		Labels          map[string]string `json:"labels"`
	} `json:"metadata"`
	Code int `json:"code"`
}

// follow opens one stream from rv and records events until ctx ends or it has taken max (when
// max > 0); it returns how many it took.
func (w *soakWatcher) follow(ctx context.Context, addr string, rv uint64, max int) (int, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	url := fmt.Sprintf("http://%s/apis/cloudnative.elide.dev/v1/namespaces/soak/applications?watch=true&resourceVersion=%d", addr, rv)
	if w.sse {
		url = fmt.Sprintf("http://%s/watch?kind=Application&namespace=soak&resourceVersion=%d", addr, rv)
	}
	if w.selector {
		url += "&labelSelector=tier%3Da"
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: watch answered %d", w.name, resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	n := 0
	for sc.Scan() {
		line := sc.Text()
		if w.sse {
			if !strings.HasPrefix(line, "data: ") {
				continue
			}
			line = strings.TrimPrefix(line, "data: ")
		}
		var ev struct {
			Type   string     `json:"type"`
			Object wireObject `json:"object"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			return n, fmt.Errorf("%s: %v in %q", w.name, err, line)
		}
		if ev.Type == "ERROR" {
			return n, fmt.Errorf("%s: an ERROR event (code %d) after %d events", w.name, ev.Object.Code, len(w.events))
		}
		v, _ := strconv.ParseUint(ev.Object.Metadata.ResourceVersion, 10, 64)
		w.mu.Lock()
		w.events = append(w.events, soakEvent{ev.Type, ev.Object.Metadata.Name, v, ev.Object.Metadata.Labels["tier"]})
		w.mu.Unlock()
		if n++; max > 0 && n >= max {
			return n, nil
		}
	}
	if ctx.Err() != nil {
		return n, nil
	}
	if err := sc.Err(); err != nil {
		return n, fmt.Errorf("%s: %v", w.name, err)
	}
	return n, fmt.Errorf("%s: the server ended the stream", w.name)
}

// throughSelector is what a tier=a watcher must see of the unfiltered events: an object that
// starts matching arrives as ADDED, one that stops matching as DELETED.
func throughSelector(all []soakEvent) []soakEvent {
	tier := map[string]string{}
	var out []soakEvent
	for _, e := range all {
		before, had := tier[e.Name]
		was := had && before == "a"
		now := e.Tier == "a"
		switch e.Type {
		case "ADDED":
			if now {
				out = append(out, e)
			}
			tier[e.Name] = e.Tier
		case "DELETED":
			if was || now {
				out = append(out, e)
			}
			delete(tier, e.Name)
		case "MODIFIED":
			switch {
			case was && now:
				out = append(out, e)
			case now:
				out = append(out, soakEvent{"ADDED", e.Name, e.RV, e.Tier})
			case was: // as kube-apiserver sends it: the last state that matched, at the new version
				out = append(out, soakEvent{"DELETED", e.Name, e.RV, before})
			}
			tier[e.Name] = e.Tier
		}
	}
	return out
}

func TestSoak(t *testing.T) {
	// Not parallel: measured alone, and kept from starving the timing-bound HA tests.
	duration := 20 * time.Second
	if v := os.Getenv("OPEMU_SOAK"); v != "" {
		d, err := time.ParseDuration(v)
		require.NoError(t, err, "OPEMU_SOAK is a duration")
		duration = d
	}
	const writers, rate = 4, 25 // each writer: 25 writes/s
	p := start(t, "ENABLE_CONTROLLER=false")
	base := "http://" + p.addr
	api := base + "/apis/cloudnative.elide.dev/v1/namespaces/soak/applications"
	client := &http.Client{Timeout: 10 * time.Second}
	var fivexx, requests atomic.Int64
	do := func(method, url, contentType, body string) (int, []byte) {
		req, _ := http.NewRequest(method, url, strings.NewReader(body))
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", method, url, err) // no FailNow: writers are goroutines
			return 0, nil
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		requests.Add(1)
		if resp.StatusCode >= 500 {
			fivexx.Add(1)
			t.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
		}
		return resp.StatusCode, b
	}
	rvOf := func(b []byte) uint64 { // 0 for anything but an object
		var o wireObject
		if json.Unmarshal(b, &o) != nil {
			return 0
		}
		v, _ := strconv.ParseUint(o.Metadata.ResourceVersion, 10, 64)
		return v
	}
	code, _ := do("POST", base+"/api/v1/namespaces", "application/json", `{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"soak"}}`)
	require.Equal(t, http.StatusCreated, code)
	code, b := do("POST", api, "application/json", `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"soak-start"},"spec":{"replicas":1,"image":"nginx:1"}}`)
	require.Equal(t, http.StatusCreated, code)
	from := rvOf(b)

	// 70 watchers: each protocol with and without the selector, from the start or resuming.
	var ws []*soakWatcher
	for i := range 70 {
		ws = append(ws, &soakWatcher{name: fmt.Sprintf("w%02d", i), sse: i%2 == 1, selector: i%5 == 4, resume: i%3 == 2})
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var watching sync.WaitGroup
	for i, w := range ws {
		watching.Go(func() { w.run(ctx, p.addr, from, rand.New(rand.NewPCG(uint64(i), 1))) })
	}

	// Writers: each owns 8 names and cycles create, spec change, label change, delete.
	var mu sync.Mutex
	written := map[uint64]bool{} // every version a write answered with
	var rss []int64
	deadline := time.Now().Add(duration)
	var writing sync.WaitGroup
	for wr := range writers {
		writing.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(wr), 2))
			tick := time.NewTicker(time.Second / rate)
			defer tick.Stop()
			for time.Now().Before(deadline) {
				<-tick.C
				name := fmt.Sprintf("soak-%d-%d", wr, rng.IntN(8))
				var code int
				var b []byte
				switch rng.IntN(4) {
				case 0:
					code, b = do("POST", api, "application/json", fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":%q,"labels":{"tier":%q}},"spec":{"replicas":%d,"image":"nginx:1"}}`,
						name, []string{"a", "b"}[rng.IntN(2)], rng.IntN(10)))
				case 1:
					code, b = do("PATCH", api+"/"+name, "application/merge-patch+json", fmt.Sprintf(`{"spec":{"replicas":%d}}`, rng.IntN(10)))
				case 2:
					code, b = do("PATCH", api+"/"+name, "application/merge-patch+json", fmt.Sprintf(`{"metadata":{"labels":{"tier":%q}}}`, []string{"a", "b"}[rng.IntN(2)]))
				case 3:
					// A removal answers a Status, without the deletion's version.
					code, _ = do("DELETE", api+"/"+name, "", "")
				}
				if code == http.StatusOK || code == http.StatusCreated {
					if v := rvOf(b); v != 0 {
						mu.Lock()
						written[v] = true
						mu.Unlock()
					}
				}
			}
		})
	}
	sampleRSS := time.NewTicker(max(duration/10, time.Second))
	defer sampleRSS.Stop()
	done := make(chan struct{})
	go func() { writing.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		case <-sampleRSS.C:
			rss = append(rss, procStatus(t, p, "VmRSS"))
		}
	}

	// The end: a last write every watcher (the selector ones too) must see.
	code, b = do("POST", api, "application/json", `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"soak-end","labels":{"tier":"a"}},"spec":{"replicas":1,"image":"nginx:1"}}`)
	require.Equal(t, http.StatusCreated, code)
	end := rvOf(b)
	require.Eventually(t, func() bool {
		for _, w := range ws {
			w.mu.Lock()
			stuck := w.err != nil
			w.mu.Unlock()
			if !stuck && w.last() < end {
				return false
			}
		}
		return true
	}, 30*time.Second, 20*time.Millisecond, "every watcher reaches the last write")
	cancel()
	watching.Wait()

	code, b = do("GET", api, "", "")
	require.Equal(t, http.StatusOK, code)
	var list struct {
		Items []wireObject `json:"items"`
	}
	require.NoError(t, json.Unmarshal(b, &list))

	// The reference is the first watcher: unfiltered, Kubernetes protocol, never reconnecting.
	ref := ws[0]
	require.False(t, ref.sse || ref.selector || ref.resume)
	for _, w := range ws {
		require.NoError(t, w.err, "%s", w.name)
	}
	all := ref.events
	for i := 1; i < len(all); i++ {
		require.Greater(t, all[i].RV, all[i-1].RV, "strictly increasing versions at %d: %v then %v", i, all[i-1], all[i])
	}
	seen := map[uint64]bool{}
	for _, e := range all {
		seen[e.RV] = true
	}
	missing := 0
	for v := range written {
		if !seen[v] {
			missing++
		}
	}
	assert.Zero(t, missing, "writes answered with a version the watch never delivered")
	replayed := map[string]uint64{"soak-start": from} // written just before the watchers began
	for _, e := range all {
		if e.Type == "DELETED" {
			delete(replayed, e.Name)
		} else {
			replayed[e.Name] = e.RV
		}
	}
	final := map[string]uint64{}
	for _, o := range list.Items {
		v, _ := strconv.ParseUint(o.Metadata.ResourceVersion, 10, 64)
		final[o.Metadata.Name] = v
	}
	assert.Equal(t, final, replayed, "replaying the watch gives the final list")
	selected := throughSelector(all)
	total, resumes := 0, 0
	for _, w := range ws {
		want := all
		if w.selector {
			want = selected
		}
		if !slices.Equal(want, w.events) {
			i := 0
			for i < len(want) && i < len(w.events) && want[i] == w.events[i] {
				i++
			}
			t.Errorf("%s (sse=%v selector=%v resume=%v): %d events, want %d; first difference at %d: got %v, want %v",
				w.name, w.sse, w.selector, w.resume, len(w.events), len(want), i, at(w.events, i), at(want, i))
		}
		total += len(w.events)
		resumes += w.resumes
	}
	t.Logf("soak of %v: %d requests, %d writes with a version, %d events delivered to %d watchers (%d resumes), no gap, no reorder, exact resumes; 5xx: %d; RSS samples (MB): %v",
		duration, requests.Load(), len(written), total, len(ws), resumes, fivexx.Load(), mb(rss))
	assert.Zero(t, fivexx.Load())
	assert.Greater(t, len(written), 100, "the writers wrote")
	assert.NotEmpty(t, selected, "the selector watchers had something to see")
	assert.Greater(t, resumes, len(ws)/3, "the resuming watchers resumed")
	if len(rss) >= 4 {
		// The RSS stays flat: the last sample within 64 MB of the largest of the first half.
		firstHalf := slices.Max(rss[:len(rss)/2])
		assert.Less(t, rss[len(rss)-1], firstHalf+64<<20, "RSS grew during the soak: %v MB", mb(rss))
	}
}

func at(evs []soakEvent, i int) any {
	if i < len(evs) {
		return evs[i]
	}
	return "nothing"
}

func mb(l []int64) []int64 {
	out := make([]int64, len(l))
	for i, v := range l {
		out[i] = v >> 20
	}
	return out
}
