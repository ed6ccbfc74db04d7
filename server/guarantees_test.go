package server_test

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/server"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// seen is one delivered watch event.
type seen struct {
	typ  string
	name string
	rv   uint64
}

func rvOf(t *testing.T, obj map[string]any) uint64 {
	t.Helper()
	rv, err := strconv.ParseUint(field(obj, "metadata", "resourceVersion").(string), 10, 64)
	require.NoError(t, err)
	return rv
}

// TestWatchGuaranteesUnderConcurrentWriters: an SSE watcher and a Kubernetes watcher, both from
// the start, see the same events, in strictly increasing order, with nothing missing (replaying
// them gives the final list), and a resume from any delivered version gives exactly the rest.
func TestWatchGuaranteesUnderConcurrentWriters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	from := strconv.FormatUint(e.store.ResourceVersion(), 10)
	sse := e.watch("?kind=Application&resourceVersion="+from, nil)
	<-sse.frames // retry:
	kube := e.kubeWatch(appsPath + "?watch=true&resourceVersion=" + from)

	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range 60 {
				name := fmt.Sprintf("w%d-%d", w, r.IntN(8))
				switch i % 3 {
				case 0:
					e.do("POST", appsPath, "application/json", app(name, r.IntN(10), "nginx:1"))
				case 1:
					e.do("PATCH", appsPath+"/"+name, "application/merge-patch+json", fmt.Sprintf(`{"spec":{"replicas":%d}}`, r.IntN(10)))
				case 2:
					e.do("DELETE", appsPath+"/"+name, "", "")
				}
			}
		})
	}
	wg.Wait()
	final := e.do("GET", appsPath, "", "").json(t)
	listRV, _ := strconv.ParseUint(field(final, "metadata", "resourceVersion").(string), 10, 64)

	collect := func(next func() (string, map[string]any)) []seen {
		var out []seen
		for len(out) == 0 || out[len(out)-1].rv < lastAppRV(t, e, listRV) {
			typ, obj := next()
			out = append(out, seen{typ, field(obj, "metadata", "name").(string), rvOf(t, obj)})
		}
		return out
	}
	fromSSE := collect(func() (string, map[string]any) { ev, _ := sse.event(); return ev.Type, ev.Object })
	fromKube := collect(kube.next)
	require.Equal(t, fromSSE, fromKube, "both protocols deliver the same events")
	for i := 1; i < len(fromSSE); i++ {
		require.Greater(t, fromSSE[i].rv, fromSSE[i-1].rv, "ordered and unique")
	}
	state := map[string]bool{}
	for _, s := range fromSSE {
		state[s.name] = s.typ != "DELETED"
	}
	var live []string
	for n, ok := range state {
		if ok {
			live = append(live, n)
		}
	}
	var listed []string
	for _, it := range final["items"].([]any) {
		listed = append(listed, field(it.(map[string]any), "metadata", "name").(string))
	}
	assert.ElementsMatch(t, listed, live, "replaying the events gives the list: no gaps")

	// Resume from a delivered version in the middle: exactly the rest, on both protocols.
	mid := fromSSE[len(fromSSE)/2]
	rest := fromSSE[len(fromSSE)/2+1:]
	r1 := e.watch("?kind=Application", map[string]string{"Last-Event-ID": strconv.FormatUint(mid.rv, 10)})
	got := make([]seen, 0, len(rest))
	for range rest {
		ev, _ := r1.event()
		got = append(got, seen{ev.Type, field(ev.Object, "metadata", "name").(string), rvOf(t, ev.Object)})
	}
	assert.Equal(t, rest, got)
	r2 := e.kubeWatch(appsPath + "?watch=true&resourceVersion=" + strconv.FormatUint(mid.rv, 10))
	got = got[:0]
	for range rest {
		typ, obj := r2.next()
		got = append(got, seen{typ, field(obj, "metadata", "name").(string), rvOf(t, obj)})
	}
	assert.Equal(t, rest, got)
}

// lastAppRV is the version of the last Application write at or before rv.
func lastAppRV(t *testing.T, e *env, rv uint64) uint64 {
	t.Helper()
	w, err := e.store.Watch(context.Background(), cache.WatchOptions{
		Resources: []cache.GroupResource{{Group: "cloudnative.elide.dev", Resource: "applications"}}, ResourceVersion: e.store.StartResourceVersion()})
	require.NoError(t, err)
	defer w.Stop()
	last := uint64(0)
	for _, ev := range cachetest.Drain(t, w, 5*time.Second) {
		if ev.ResourceVersion <= rv {
			last = ev.ResourceVersion
		}
	}
	return last
}

// TestAbandonedWatchersAreReleased opens 500 SSE and Kubernetes watches that never read, writes
// enough to fill their buffers, drops them, and checks goroutines and heap come back. The store's
// history is kept small and filled before the baselines. The heap baseline is taken after one
// warm-up cycle: the Go runtime keeps the descriptor of every goroutine it ever ran for reuse
// (runtime.malg, about 0.9 MB for these 2,000), which is not the server's to give back; a leak
// shows as growth over the two cycles after it.
func TestAbandonedWatchersAreReleased(t *testing.T) {
	e := newEnv(t, func(c *server.Config, s *cache.Config) {
		c.WriteTimeout = 200 * time.Millisecond
		s.WatchBuffer = 16
		s.WatchHistory = 100
	})
	for i := range 40 {
		require.Equal(t, http.StatusCreated, e.do("POST", appsPath, "application/json", app(fmt.Sprint("a", i), 1, "nginx:1")).code)
	}
	writes := func() {
		for r := range 5 {
			for i := range 40 {
				require.Equal(t, http.StatusOK, e.do("PATCH", fmt.Sprintf("%s/a%d", appsPath, i), "application/merge-patch+json",
					fmt.Sprintf(`{"spec":{"replicas":%d}}`, 2+r%2)).code)
			}
		}
	}
	writes()
	measure := func() (int, uint64) {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return runtime.NumGoroutine(), ms.HeapAlloc
	}
	// settle waits until goroutines are back within 10 of g0 and the heap within 20% of h0,
	// and returns the last measure.
	settle := func(g0 int, h0 uint64) (g int, h uint64) {
		assert.EventuallyWithT(t, func(c *assert.CollectT) {
			g, h = measure()
			assert.LessOrEqual(c, g, g0+10, "goroutines back within 10 of the start")
			assert.LessOrEqual(c, float64(h), float64(h0)*1.2, "heap within 20%")
		}, 15*time.Second, 50*time.Millisecond)
		return g, h
	}
	cycle := func() int {
		client := &http.Client{Transport: &http.Transport{}}
		var cancels []context.CancelFunc
		for i := range 500 {
			ctx, cancel := context.WithCancel(context.Background())
			cancels = append(cancels, cancel)
			path := "/watch"
			if i%2 == 1 {
				path = appsPath + "?watch=true"
			}
			req, err := http.NewRequestWithContext(ctx, "GET", e.http.URL+path, nil)
			require.NoError(t, err)
			resp, err := client.Do(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode)
			_ = resp // never read: a slow or abandoned client
		}
		open := runtime.NumGoroutine()
		writes()
		for _, c := range cancels {
			c()
		}
		client.CloseIdleConnections()
		return open
	}

	g0, _ := measure()
	gOpen := cycle()
	require.Greater(t, gOpen, g0+500, "the watchers were really open")
	g1, h1 := settle(g0, math.MaxUint64)
	cycle()
	cycle()
	g2, h2 := settle(g0, h1)
	t.Logf("goroutines %d -> %d with 500 watchers -> %d after one cycle, %d after three; heap %d -> %d bytes", g0, gOpen, g1, g2, h1, h2)
}

// TestClientsThatLeaveMidRequest: bodies that stop halfway (the client hangs up, or gives up
// while still sending) and clients that send a whole request and leave before the answer do not
// leave half-written objects or stuck handlers.
func TestClientsThatLeaveMidRequest(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	body, whole := app("half", 1, "nginx:1"), app("whole", 1, "nginx:1")
	addr := strings.TrimPrefix(e.http.URL, "http://")
	for i := range 20 {
		t.Run(fmt.Sprint("hang-up-", i), func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				appsPath, len(body), body[:len(body)/2])
			require.NoError(t, c.Close())
		})
		t.Run(fmt.Sprint("give-up-", i), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
			defer cancel()
			pr, pw := io.Pipe()
			go func() {
				_, _ = pw.Write([]byte(body[:len(body)/2]))
				<-ctx.Done()
				pw.CloseWithError(ctx.Err())
			}()
			req, err := http.NewRequestWithContext(ctx, "POST", e.http.URL+appsPath, pr)
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			_, err = e.http.Client().Do(req)
			assert.ErrorIs(t, err, context.DeadlineExceeded)
		})
		t.Run(fmt.Sprint("leave-before-answer-", i), func(t *testing.T) {
			c, err := net.Dial("tcp", addr)
			require.NoError(t, err)
			fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\nPOST %s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s",
				appsPath, appsPath, len(whole), whole)
			require.NoError(t, c.Close())
		})
	}
	status(t, e.do("GET", appsPath+"/half", "", ""), 404, "NotFound")
	require.Equal(t, http.StatusOK, e.do("GET", "/healthz", "", "").code)
	// The whole requests sent by clients that left are either fully applied or not at all.
	r := e.do("GET", appsPath, "", "").json(t)
	for _, it := range r["items"].([]any) {
		o := it.(map[string]any)
		assert.Equal(t, "whole", field(o, "metadata", "name"))
		assert.EqualValues(t, 1, field(o, "spec", "replicas"))
	}
}
