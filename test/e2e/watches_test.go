package e2e

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/test/internal/request"
)

// openRawSSE opens n raw SSE connections to p (with a receive buffer of rcvbuf bytes when set) and
// reads each one's status line; it returns them open, unread from then on.
func openRawSSE(t *testing.T, p *proc, n, rcvbuf int) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failed []string
	const workers = 16
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				conn, err := net.DialTimeout("tcp", p.addr, 5*time.Second)
				if err == nil && rcvbuf > 0 {
					err = conn.(*net.TCPConn).SetReadBuffer(rcvbuf)
				}
				if err == nil {
					_, err = io.WriteString(conn, "GET /watch?kind=Application HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
				}
				var status string
				if err == nil {
					_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
					status, err = bufio.NewReaderSize(conn, 64).ReadString('\n')
					_ = conn.SetReadDeadline(time.Time{})
				}
				if err != nil || !strings.Contains(status, " 200 ") {
					mu.Lock()
					failed = append(failed, fmt.Sprintf("watch %d: %q %v", i, status, err))
					mu.Unlock()
				}
				conns[i] = conn
			}
		})
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			if c != nil {
				c.Close()
			}
		}
	})
	require.Empty(t, failed[:min(len(failed), 3)], "%d of %d watches failed", len(failed), n)
	return conns
}

// TestIdleWatchersCost: 5,000 idle SSE watchers (the default MAX_WATCHES) cost the server less
// than 20 KB of live heap each (measured after a GC in the server process, the binary as it
// ships); the next watch gets 429 with Retry-After.
func TestIdleWatchersCost(t *testing.T) {
	// Not parallel: measured alone, and kept from starving the timing-bound HA tests.
	const n = 5000
	p := startBinary(t, shippedBinary(t), "PPROF=true", "ENABLE_CONTROLLER=false")
	before := liveHeap(t, p)
	rssBefore := procStatus(t, p, "VmRSS")
	openRawSSE(t, p, n, 0)
	after := liveHeap(t, p)
	per := (after - before) / n
	rssPer := (procStatus(t, p, "VmRSS") - rssBefore) / n
	t.Logf("%d idle SSE watchers: %.1f KB of live heap each (%.1f MB in all); RSS %.1f KB each, goroutine stacks included",
		n, float64(per)/1024, float64(after-before)/(1<<20), float64(rssPer)/1024)
	assert.Less(t, per, int64(20<<10))

	resp, err := http.Get("http://" + p.addr + "/watch")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusTooManyRequests, resp.StatusCode, "MAX_WATCHES defaults to 5,000")
	assert.Equal(t, "1", resp.Header.Get("Retry-After"))
}

// TestHistoryBoundedInBytes: 300 create+delete cycles of a 3 MiB object leave the server's live
// heap (after a GC; the binary as it ships) within WATCH_HISTORY_BYTES of where it started,
// with nothing stored; a
// watch from the first cycle's version answers 410, one from the last cycle's works.
func TestHistoryBoundedInBytes(t *testing.T) {
	// Not parallel: measured alone, and kept from starving the timing-bound HA tests.
	const budget = 64 << 20
	p := startBinary(t, shippedBinary(t), "PPROF=true", "ENABLE_CONTROLLER=false", fmt.Sprintf("WATCH_HISTORY_BYTES=%d", budget))
	api := "http://" + p.addr + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	before := liveHeap(t, p)
	head := `{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"big"},"spec":{"replicas":1,"image":"nginx:1","config":{"blob":"`
	tail := `"}}}`
	body := head + strings.Repeat("x", 3<<20-len(head)-len(tail)) + tail
	require.Len(t, body, 3<<20)
	client := &http.Client{Timeout: 30 * time.Second}
	do := func(method, url, body string) (int, string) {
		req, err := http.NewRequest(method, url, strings.NewReader(body))
		require.NoError(t, err)
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return resp.StatusCode, string(b)
	}
	var first, last string
	start := time.Now()
	for i := range 300 {
		code, created := do("POST", api, body)
		require.Equal(t, http.StatusCreated, code, "%.300s", created)
		rv := listeningRV.FindStringSubmatch(created)
		require.NotNil(t, rv)
		if i == 0 {
			first = rv[1]
		}
		last = rv[1]
		code, _ = do("DELETE", api+"/big", "")
		require.Equal(t, http.StatusOK, code)
		if i%50 == 49 {
			// Checked along the way, so that a store pinning every cycle fails at 150 MB, not 1.8 GB.
			grown := liveHeap(t, p) - before
			t.Logf("after %d cycles: live heap %+.1f MB", i+1, float64(grown)/(1<<20))
			require.LessOrEqual(t, grown, int64(budget), "the live heap grew past WATCH_HISTORY_BYTES")
		}
	}
	t.Logf("300 cycles of a 3 MiB object in %v", time.Since(start))
	res, err := http.Get(api)
	require.NoError(t, err)
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	assert.Contains(t, string(b), `"items":[]`, "nothing is stored")

	watch := func(rv string) string {
		resp, err := client.Get(api + "?watch=true&timeoutSeconds=1&resourceVersion=" + rv)
		require.NoError(t, err)
		defer resp.Body.Close()
		line, _ := bufio.NewReader(resp.Body).ReadString('\n')
		return line
	}
	assert.Contains(t, watch(first), `"code":410`, "the first cycle's version is gone from the history")
	assert.Contains(t, watch(last), `"type":"DELETED"`, "the last cycle's delete is still there")
}

// TestShutdownWithStalledWatchers: with 200 SSE watchers that stopped reading, each owed ten
// 1 MiB frames (more than the kernel's socket buffers take, so their handlers are blocked in
// writes), SIGTERM still exits 0 within 5 s, and a watcher that reads sees its stream end
// cleanly.
func TestShutdownWithStalledWatchers(t *testing.T) {
	// Not parallel: measured alone, and kept from starving the timing-bound HA tests.
	p := start(t, "ENABLE_CONTROLLER=false")
	api := "http://" + p.addr + "/apis/cloudnative.elide.dev/v1/namespaces/default/applications"
	openRawSSE(t, p, 200, 4096)
	reader, err := http.Get("http://" + p.addr + "/watch?kind=Application")
	require.NoError(t, err)
	defer reader.Body.Close()
	frames := make(chan string, 20)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(reader.Body)
		sc.Buffer(make([]byte, 4<<20), 4<<20)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "id: ") {
				frames <- sc.Text()
			}
		}
		readErr <- sc.Err()
	}()
	blob := strings.Repeat("x", 1<<20)
	for i := range 10 {
		code, _ := request.JSON(t, "POST", api, fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"big-%d"},"spec":{"replicas":1,"image":"nginx:1","config":{"blob":%q}}}`, i, blob))
		require.Equal(t, http.StatusCreated, code)
	}
	for range 10 {
		select {
		case <-frames:
		case <-time.After(10 * time.Second):
			t.Fatal("the reading watcher did not get the 10 events")
		}
	}

	begun := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	code := p.wait(t, 10*time.Second)
	took := time.Since(begun)
	t.Logf("SIGTERM with 200 stalled watchers: exit %d after %v", code, took)
	assert.Equal(t, 0, code, "stderr:\n%s", p.logs())
	assert.Less(t, took, 5*time.Second)
	select {
	case err := <-readErr:
		assert.NoError(t, err, "the reading watcher's stream ends cleanly")
	case <-time.After(5 * time.Second):
		t.Fatal("the reading watcher's stream did not end")
	}
}

// listeningRV finds an object's resourceVersion in its JSON.
var listeningRV = regexp.MustCompile(`"resourceVersion":"(\d+)"`)
