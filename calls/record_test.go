package calls_test

import (
	"fmt"
	"net/url"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/opemu/opemu/calls"
)

func call(verb, resource, ns, name string) *calls.Call {
	return &calls.Call{Start: time.Unix(100, 0), Verb: verb, Resource: resource, Namespace: ns, Name: name, User: "alice", Code: 200}
}

// TestRingKeepsTheNewest: the ring keeps its size's newest calls, oldest first, numbered from 1.
func TestRingKeepsTheNewest(t *testing.T) {
	r := calls.New(calls.Config{Size: 3})
	for i := range 5 {
		r.Add(call("get", "pods", "default", fmt.Sprint("p", i)))
	}
	got := r.List(calls.Filter{})
	require.Len(t, got, 3)
	for i, c := range got {
		assert.Equal(t, uint64(i+3), c.ID)
		assert.Equal(t, fmt.Sprint("p", i+2), c.Name)
	}
	assert.Equal(t, uint64(5), r.Last())
	assert.Len(t, r.List(calls.Filter{After: 4}), 1)
	assert.Len(t, r.List(calls.Filter{Limit: 2}), 2)
	assert.Equal(t, uint64(5), r.List(calls.Filter{Limit: 1})[0].ID)
	var nilRecord *calls.Record
	nilRecord.Add(call("get", "pods", "", ""))
	assert.Nil(t, nilRecord.List(calls.Filter{}))
}

// TestRingKeepsEveryField: a call comes back from the ring as it was recorded, every field
// (every one is set here, so a field the ring's packing forgets fails), but its body and
// annotations; and a call read back keeps its strings while the ring records more.
func TestRingKeepsEveryField(t *testing.T) {
	r := calls.New(calls.Config{Size: 2})
	in := calls.Call{Start: time.Unix(100, 5), Latency: time.Second, User: "alice", UID: "u-1", Groups: []string{"g1", "g2"},
		UserAgent: "agent/v1", FieldManager: "fm", SourceIP: "127.0.0.1:5", Verb: "patch", APIGroup: "apps", APIVersion: "v1",
		Resource: "deployments", Subresource: "status", Namespace: "ns", Name: "web", RequestURI: "/apis/apps/v1/namespaces/ns/deployments/web/status?x=y",
		Code: 409, Reason: "Conflict", ResourceVersion: 42, WatchEvents: 3, Open: true, Internal: true, Component: "comp",
		Reconcile: "deployments/ns/web", Forbidden: true, Body: []byte("{}"), BodyType: "application/json", Annotations: map[string]string{"a/b": "c"}}
	v := reflect.ValueOf(in)
	for i := range v.NumField() {
		require.False(t, v.Field(i).IsZero() && v.Type().Field(i).Name != "ID", "set %s", v.Type().Field(i).Name)
	}
	c := in
	r.Add(&c)
	want := in
	want.ID, want.Body, want.BodyType, want.Annotations = 1, nil, "", nil
	got := r.List(calls.Filter{})
	require.Len(t, got, 1)
	assert.Equal(t, want, got[0])
	for i := range 100 {
		r.Add(call("get", "pods", "default", strings.Repeat("x", i)))
	}
	assert.Equal(t, want, got[0], "a call read back is not overwritten")
}

// TestRingDropsBodies: the sink sees the body; the ring does not keep it, and the caller's
// call is left as it was.
func TestRingDropsBodies(t *testing.T) {
	var seen []byte
	r := calls.New(calls.Config{Sink: func(c *calls.Call) { seen = c.Body }})
	c := call("create", "pods", "default", "")
	c.Body = []byte(`{}`)
	r.Add(c)
	assert.Equal(t, []byte(`{}`), seen)
	assert.Equal(t, []byte(`{}`), c.Body)
	assert.Nil(t, r.List(calls.Filter{})[0].Body)
}

// TestFinishReplacesTheOpenCall: a watch recorded open is replaced, under its ID, when it ends.
func TestFinishReplacesTheOpenCall(t *testing.T) {
	r := calls.New(calls.Config{})
	w := call("watch", "pods", "", "")
	w.Open = true
	r.Add(w)
	w.Open, w.WatchEvents, w.Latency = false, 7, time.Second
	r.Finish(w)
	got := r.List(calls.Filter{})
	require.Len(t, got, 1)
	assert.False(t, got[0].Open)
	assert.Equal(t, int64(7), got[0].WatchEvents)
}

func TestFilter(t *testing.T) {
	base := calls.Call{ID: 9, Start: time.Unix(100, 0), User: "alice", UserAgent: "op/v1 (linux)", Verb: "update", APIGroup: "apps",
		Resource: "deployments", Subresource: "status", Namespace: "ns", Name: "web", Code: 409, Reconcile: "ctl#3"}
	internal := base
	internal.User, internal.Internal, internal.Component = "", true, "opemu-workloads"
	for _, tc := range []struct {
		query string
		c     calls.Call
		match bool
	}{
		{"", base, true},
		{"user=alice", base, true},
		{"user=bob", base, false},
		{"user=opemu-workloads", internal, true},
		{"agent=op", base, true},
		{"agent=kubectl", base, false},
		{"verb=UPDATE", base, true},
		{"resource=deployments/status", base, true},
		{"resource=apps/deployments/status", base, true},
		{"resource=deployments", base, false},
		{"namespace=ns&name=web", base, true},
		{"code=409", base, true},
		{"code=200", base, false},
		{"since=1970-01-01T00:01:40Z", base, true},
		{"since=1970-01-01T00:01:41Z", base, false},
		{"until=1970-01-01T00:01:41Z", base, true},
		{"reconcile=ctl%233", base, true},
		{"internal=true", base, false},
		{"internal=true", internal, true},
		{"writes=true", base, true},
		{"after=9", base, false},
	} {
		t.Run(tc.query, func(t *testing.T) {
			q, err := url.ParseQuery(tc.query)
			require.NoError(t, err)
			f, err := calls.ParseFilter(q, time.Unix(200, 0))
			require.NoError(t, err)
			assert.Equal(t, tc.match, f.Match(&tc.c))
		})
	}
	for _, bad := range []string{"code=abc", "code=99", "since=yesterday", "since=-5m", "writes=maybe", "after=x", "limit=-1", "internal=maybe"} {
		q, _ := url.ParseQuery(bad)
		_, err := calls.ParseFilter(q, time.Now())
		assert.Error(t, err, bad)
	}
	q, _ := url.ParseQuery("since=5m")
	f, err := calls.ParseFilter(q, time.Unix(1000, 0))
	require.NoError(t, err)
	assert.Equal(t, time.Unix(700, 0), f.Since)
}

// TestSubscription: a subscriber gets the matching calls recorded after it subscribed, misses
// (and counts) what its buffer cannot hold, and Close closes its channel.
func TestSubscription(t *testing.T) {
	r := calls.New(calls.Config{})
	r.Add(call("get", "pods", "", "before"))
	s := r.Subscribe(calls.Filter{Verb: "get"}, 2)
	r.Add(call("list", "pods", "", ""))
	for i := range 3 {
		r.Add(call("get", "pods", "", fmt.Sprint(i)))
	}
	assert.Equal(t, "0", (<-s.C).Name)
	assert.Equal(t, "1", (<-s.C).Name)
	assert.Equal(t, int64(1), s.Missed())
	s.Close()
	s.Close()
	_, open := <-s.C
	assert.False(t, open)
	r.Add(call("get", "pods", "", "after")) // no subscriber left: nothing blocks
}

// BenchmarkRecordAdd is the cost of recording one call on the request path.
func BenchmarkRecordAdd(b *testing.B) {
	r := calls.New(calls.Config{})
	c := call("get", "configmaps", "default", "cm")
	b.ReportAllocs()
	for b.Loop() {
		r.Add(c)
	}
}

// BenchmarkRecordMemory measures what a full ring of DefaultSize costs the heap, each call with
// strings of its own as a request's are (a client-go user agent, a request URI, an address),
// reported as bytes per call.
func BenchmarkRecordMemory(b *testing.B) {
	for b.Loop() {
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		r := calls.New(calls.Config{})
		groups := []string{"system:serviceaccounts", "system:authenticated"}
		for i := range calls.DefaultSize {
			n := fmt.Sprint(i)
			r.Add(&calls.Call{Start: time.Now(), User: "system:serviceaccount:memcached-system:memcached-operator", Groups: groups,
				UserAgent:  strings.Clone("memcached-operator/v0.0.0 (linux/amd64) kubernetes/$Format"),
				RequestURI: "/apis/cache.example.com/v1alpha1/namespaces/cache/memcacheds/cache-" + n + "/status",
				SourceIP:   strings.Clone("127.0.0.1:54321"), Verb: "update", APIGroup: "cache.example.com", APIVersion: "v1alpha1",
				Resource: "memcacheds", Subresource: "status", Namespace: "cache", Name: "cache-" + n, Code: 200})
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/calls.DefaultSize, "B/call")
		runtime.KeepAlive(r)
	}
}
