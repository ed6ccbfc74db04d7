package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/opemu/opemu/etcd/etcdtest"
)

// cutWatches is a client transport that ends every watch stream after a few of its events
// (past its initial events, when it has some), at a line boundary, as a connection that breaks
// does: the client resumes from the last version it got, which may be a version several Events
// share.
type cutWatches struct {
	next    http.RoundTripper
	streams atomic.Int64 // watch streams opened
	cuts    atomic.Int64 // streams cut
}

func (c *cutWatches) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := c.next.RoundTrip(r)
	if err != nil || r.URL.Query().Get("watch") != "true" {
		return resp, err
	}
	q := r.URL.Query()
	resp.Body = &cutBody{body: resp.Body, r: bufio.NewReader(resp.Body), left: 1 + int(c.streams.Add(1)%3),
		from: q.Get("resourceVersion"), armed: q.Get("sendInitialEvents") != "true", cuts: &c.cuts}
	return resp, nil
}

// cutBody passes the lines of body through until left events newer than the version the
// watch started from have passed once armed, then ends (the changes of that version it replays
// do not count, so each stream moves the client on); a stream with initial events is armed by
// the bookmark that ends them.
type cutBody struct {
	body    io.ReadCloser
	r       *bufio.Reader
	pending []byte
	left    int
	from    string
	armed   bool
	cuts    *atomic.Int64
}

func (b *cutBody) Read(p []byte) (int, error) {
	if len(b.pending) == 0 {
		if b.armed && b.left == 0 {
			b.cuts.Add(1)
			b.left = -1
		}
		if b.left < 0 {
			return 0, io.EOF
		}
		line, err := b.r.ReadBytes('\n')
		if len(line) == 0 {
			return 0, err
		}
		var ev struct {
			Type   string
			Object struct {
				Metadata struct{ ResourceVersion string }
			}
		}
		_ = json.Unmarshal(line, &ev)
		if b.armed && ev.Type != "BOOKMARK" && ev.Object.Metadata.ResourceVersion != b.from {
			b.left--
		} else if bytes.Contains(line, []byte("k8s.io/initial-events-end")) {
			b.armed = true
		}
		b.pending = line
	}
	n := copy(p, b.pending)
	b.pending = b.pending[n:]
	return n, nil
}

func (b *cutBody) Close() error { return b.body.Close() }

// TestEtcdInformerSeesEveryEvent: Events created concurrently through a replica on a real etcd
// are group-committed (several share a resourceVersion), and client-go's informer, whose watch
// is cut every few events and resumed from the last version it got, still sees every Event,
// and ends with the server's list (names and versions); so does an SSE client resuming with
// Last-Event-ID after every few events.
func TestEtcdInformerSeesEveryEvent(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t)
	r := etcdReplica(t, "evw-1", e, "/evw", "ENABLE_CONTROLLER=false", "ENABLE_LEADER_ELECTION=false")

	cut := &cutWatches{}
	cfg := &rest.Config{Host: "http://" + r.p.addr, QPS: -1,
		ContentConfig: rest.ContentConfig{ContentType: "application/json", AcceptContentTypes: "application/json"},
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { cut.next = rt; return cut }}
	cs, err := kubernetes.NewForConfig(cfg)
	require.NoError(t, err)

	factory := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace("default"))
	inf := factory.Core().V1().Events().Informer()
	var mu sync.Mutex
	seen := map[string]bool{}
	note := func(obj any) {
		if ev, ok := obj.(*corev1.Event); ok {
			mu.Lock()
			seen[ev.Name] = true
			mu.Unlock()
		}
	}
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: note, UpdateFunc: func(_, obj any) { note(obj) }})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(t.Context())
	factory.Start(ctx.Done())
	defer func() { cancel(); factory.Shutdown() }()
	require.True(t, cache.WaitForCacheSync(ctx.Done(), inf.HasSynced))

	before, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	const writers, each = 16, 15
	versions := map[string]int{}
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				name := fmt.Sprintf("ev-%02d-%02d", w, i)
				created, err := cs.CoreV1().Events("default").Create(ctx, &corev1.Event{
					ObjectMeta:     metav1.ObjectMeta{Name: name},
					InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: "p", Namespace: "default"},
					Reason:         "Client", Message: name, Type: corev1.EventTypeNormal,
				}, metav1.CreateOptions{})
				if !assert.NoError(t, err, name) {
					return
				}
				mu.Lock()
				versions[created.ResourceVersion]++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	shared := 0
	for _, n := range versions {
		if n > 1 {
			shared++
		}
	}
	require.Positive(t, shared, "several Events share a version (group commit): %d versions for %d Events", len(versions), writers*each)

	list, err := cs.CoreV1().Events("default").List(ctx, metav1.ListOptions{})
	require.NoError(t, err)
	want := map[string]string{}
	for _, ev := range list.Items {
		want[ev.Name] = ev.ResourceVersion
	}
	require.GreaterOrEqual(t, len(want), writers*each)
	assert.Eventually(t, func() bool {
		got := map[string]string{}
		for _, o := range inf.GetStore().List() {
			ev := o.(*corev1.Event)
			got[ev.Name] = ev.ResourceVersion
		}
		return assert.ObjectsAreEqual(want, got)
	}, 30*time.Second, 50*time.Millisecond, "the informer's store ends as the server's list")
	mu.Lock()
	missed := 0
	for name := range want {
		if !seen[name] {
			missed++
		}
	}
	mu.Unlock()
	assert.Zero(t, missed, "Events the handler never saw")
	t.Logf("%d Events at %d versions (%d shared), %d watch streams cut", writers*each, len(versions), shared, cut.cuts.Load())

	// The dashboard's stream: from the version before the creates, cut after one to three
	// new events each time and resumed with Last-Event-ID.
	last, got := before.ResourceVersion, map[string]bool{}
	for i := 0; len(got) < len(want) && i < 2*len(want); i++ {
		s := openSSEFrom(t, r.url("/watch?kind=Event&namespace=default"), last)
		quiet := false
		for left := 1 + i%3; left > 0 && !quiet; {
			var ev idEvent
			var ok bool
			select {
			case ev, ok = <-s.events:
			case <-time.After(5 * time.Second): // nothing more: what is missing was lost
				quiet = true
			}
			if !ok {
				break
			}
			require.NotEqual(t, "ERROR", ev.typ, "resume at %s", last)
			got[ev.name] = true
			if ev.id != last {
				last = ev.id
				left--
			}
			if len(got) == len(want) {
				break
			}
		}
		s.close()
		if quiet {
			break
		}
	}
	missed = 0
	for name := range want {
		if !got[name] {
			missed++
		}
	}
	assert.Zero(t, missed, "Events the SSE client never saw")
	assert.Greater(t, cut.cuts.Load(), int64(10), "the informer's watch was cut and resumed many times")
}
