package etcd_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestCreateEncoded: an object its writer encoded (the recorder's Events) is stored in etcd as
// Create stores the same object, lease and batch included, and reaches watchers the same way.
func TestCreateEncoded(t *testing.T) {
	t.Parallel()
	client := etcdtest.Start(t).Client(t)
	s := newStore(t, client, cache.Config{})
	ctx := t.Context()
	body := func(name string, rv string) string {
		return `{"apiVersion":"v1","kind":"Event","metadata":{"name":"` + name + `","namespace":"ns",` +
			`"resourceVersion":"` + rv + `","uid":"u-` + name + `"},"reason":"Created","type":"Normal"}`
	}
	w, err := s.Watch(ctx, cache.WatchOptions{Resources: []cache.GroupResource{{Resource: "events"}}, ResourceVersion: s.ResourceVersion()})
	require.NoError(t, err)
	defer w.Stop()

	var m map[string]any
	require.NoError(t, json.Unmarshal([]byte(body("general", "0")), &m))
	opts := cache.WriteOptions{TTL: time.Hour}
	general, err := s.Create(ctx, cache.Key{Resource: "events", Namespace: "ns", Name: "general"}, m, opts)
	require.NoError(t, err)
	key := cache.Key{Resource: "events", Namespace: "ns", Name: "encoded"}
	enc := func() cache.Encoded {
		b := body("encoded", cache.RVPlaceholder)
		return cache.Encoded{JSON: []byte(b), VersionAt: strings.Index(b, `"resourceVersion"`), UID: "u-encoded", Generation: 1, Fields: []string{"reason", "Created", "type", "Normal"}}
	}
	o, err := s.CreateEncoded(ctx, key, enc(), opts)
	require.NoError(t, err)

	rv := strconv.FormatUint(o.ResourceVersion(), 10)
	want := strings.ReplaceAll(string(general.Raw()), "general", "encoded")
	want = strings.Replace(want, `"resourceVersion":"`+strconv.FormatUint(general.ResourceVersion(), 10)+`"`, `"resourceVersion":"`+rv+`"`, 1)
	assert.Equal(t, want, string(o.Raw()), "stored as Create stores it")
	got, err := s.Get(ctx, key)
	require.NoError(t, err)
	assert.Equal(t, string(o.Raw()), string(got.Raw()), "the cache holds what etcd holds")
	assert.Equal(t, "Created", got.Field("reason"))
	stored, err := client.Get(ctx, "/test-", clientv3.WithPrefix())
	require.NoError(t, err)
	leases := map[string]bool{}
	for _, kv := range stored.Kvs {
		for _, name := range []string{"general", "encoded"} {
			if strings.HasSuffix(string(kv.Key), "/events/ns/"+name) {
				leases[name] = kv.Lease != 0
			}
		}
	}
	assert.Equal(t, map[string]bool{"general": true, "encoded": true}, leases, "each with its TTL's lease")
	for _, name := range []string{"general", "encoded"} {
		select {
		case ev := <-w.Events():
			assert.Equal(t, cache.Added, ev.Type)
			assert.Equal(t, name, ev.Object.Key().Name)
		case <-time.After(10 * time.Second):
			t.Fatalf("no ADDED event for %s", name)
		}
	}

	_, err = s.CreateEncoded(ctx, key, enc(), opts)
	assert.ErrorIs(t, err, cache.ErrAlreadyExists)
	_, err = s.CreateEncoded(ctx, cache.Key{Resource: "events", Namespace: "ns", Name: "dry"}, enc(), cache.WriteOptions{DryRun: true})
	assert.ErrorIs(t, err, cache.ErrInvalid, "no dry run")
	_, err = s.CreateEncoded(ctx, cache.Key{Resource: "events", Namespace: "ns", Name: "bad"}, cache.Encoded{JSON: []byte(`{"metadata":{"name":"bad"}}`)}, opts)
	assert.ErrorIs(t, err, cache.ErrInvalid, "no version to give")
}
