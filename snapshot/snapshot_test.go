package snapshot_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/snapshot"
)

// seeded is a store holding a namespace, a CRD, a custom resource owning a ConfigMap (created
// before its owner, so key order is not file order), and n more ConfigMaps.
func seeded(t testing.TB, n int) *cache.Store {
	t.Helper()
	s := cache.New(cache.Config{})
	ctx := context.Background()
	create := func(key cache.Key, obj map[string]any) {
		t.Helper()
		_, err := s.Create(ctx, key, obj, cache.WriteOptions{})
		require.NoError(t, err)
	}
	md := func(ns, name, uid string) map[string]any {
		m := map[string]any{"name": name, "uid": uid, "creationTimestamp": "2030-01-01T00:00:00Z"}
		if ns != "" {
			m["namespace"] = ns
		}
		return m
	}
	cm := md("team", "child", "uid-child")
	cm["ownerReferences"] = []any{map[string]any{"apiVersion": "example.org/v1", "kind": "Thing", "name": "owner", "uid": "uid-owner"}}
	cm["finalizers"] = []any{"example.org/hold"}
	create(cache.Key{Resource: "configmaps", Namespace: "team", Name: "child"}, map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": cm})
	create(cache.Key{Group: "example.org", Resource: "things", Namespace: "team", Name: "owner"},
		map[string]any{"apiVersion": "example.org/v1", "kind": "Thing", "metadata": md("team", "owner", "uid-owner"), "status": map[string]any{"ok": true}})
	create(cache.Key{Resource: "namespaces", Name: "team"}, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": md("", "team", "uid-ns")})
	create(cache.Key{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions", Name: "things.example.org"},
		map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition", "metadata": md("", "things.example.org", "uid-crd")})
	for i := range n {
		name := fmt.Sprint("cm-", i)
		create(cache.Key{Resource: "configmaps", Namespace: "team", Name: name},
			map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": md("team", name, "uid-"+name), "data": map[string]any{"i": fmt.Sprint(i)}})
	}
	return s
}

func write(t testing.TB, s *snapshot.Snapshot, f snapshot.Format) string {
	t.Helper()
	var out bytes.Buffer
	require.NoError(t, snapshot.Write(&out, s, f))
	return out.String()
}

// TestWriteRead: the file holds the objects in apply order (CRD, namespace, owner, dependent)
// without resourceVersions, the uids in the annotation; read back and written again, in
// either format, it is the same file.
func TestWriteRead(t *testing.T) {
	t.Parallel()
	store := seeded(t, 2)
	s, err := snapshot.Take(context.Background(), store, nil)
	require.NoError(t, err)
	require.Equal(t, 6, s.Len())
	assert.Equal(t, store.ResourceVersion(), s.ResourceVersion)

	file := write(t, s, snapshot.YAML)
	assert.NotContains(t, file, "resourceVersion:")
	assert.NotContains(t, file, "\n  uid:")
	order := []string{"kind: CustomResourceDefinition", "kind: Namespace", "kind: Thing", "name: child"}
	last := -1
	for _, o := range order {
		i := strings.Index(file, o)
		require.Greater(t, i, last, "%s comes after %s:\n%s", o, order, file)
		last = i
	}
	assert.Contains(t, file, "snapshot.opemu.dev/uid: uid-owner")
	assert.Regexp(t, `^# opemu snapshot: 6 objects at resourceVersion \d+\n---\n`, file)

	for _, f := range []snapshot.Format{snapshot.YAML, snapshot.JSON} {
		t.Run(string(f), func(t *testing.T) {
			written := write(t, s, f)
			read, err := snapshot.Read(strings.NewReader(written))
			require.NoError(t, err)
			assert.Equal(t, s.Len(), read.Len())
			assert.Equal(t, s.ResourceVersion, read.ResourceVersion)
			assert.Equal(t, written, write(t, read, f), "read back and written again: the same file")
		})
	}
}

// TestRead: what kubectl apply -f takes is read (a List's items, JSON objects one after the
// other, comments only); what is not made of objects is a 400 naming the document.
func TestRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, in string
		objects  int
		err      string
	}{
		{"list", "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: a}}\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: b}}\n", 2, ""},
		{"json objects", `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}} {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b"}}`, 2, ""},
		{"comments only", "# nothing\n---\n# here\n", 0, ""},
		{"a scalar", "a: 1\n---\nhello\n", 0, "snapshot: document 2: not an object"},
		{"bad clock", "# clock: yesterday manual\n", 0, "snapshot: document 1: the clock line"},
		{"a list item", "kind: List\nitems: [1]\n", 0, "snapshot: document 1: List item 0 is not an object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := snapshot.Read(strings.NewReader(tc.in))
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.objects, s.Len())
		})
	}
}

// TestReadLimited: a stream's YAML documents whose aliases expand them past the limit in all
// are a 413 before they are expanded, whether one document does it or several; the same stream
// is read without a limit.
func TestReadLimited(t *testing.T) {
	t.Parallel()
	doc := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata:\n  a: &a " + strings.Repeat("x", 1000) + "\n  b: *a\n  c: *a\n"
	}
	for _, tc := range []struct {
		name, in string
		limit    int
		err      bool
	}{
		{"one document within the limit", doc("a"), 4000, false},
		{"one document past it", doc("a"), 2000, true},
		{"two documents within it, three past it in all", doc("a") + "---\n" + doc("b") + "---\n" + doc("c"), 8000, true},
		{"no limit", doc("a") + "---\n" + doc("b") + "---\n" + doc("c"), 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, err := snapshot.ReadLimited(strings.NewReader(tc.in), tc.limit)
			if tc.err {
				require.Error(t, err)
				assert.True(t, apierrors.IsRequestEntityTooLargeError(err), "%v", err)
				return
			}
			require.NoError(t, err)
			assert.Positive(t, s.Len())
		})
	}
}

// FuzzRead: Read never panics; what it reads, written and read again, holds as many objects.
func FuzzRead(f *testing.F) {
	s, err := snapshot.Take(context.Background(), seeded(f, 1), nil)
	require.NoError(f, err)
	f.Add([]byte(write(f, s, snapshot.YAML)))
	f.Add([]byte(write(f, s, snapshot.JSON)))
	f.Add([]byte("kind: List\nitems:\n- {kind: A}\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := snapshot.Read(bytes.NewReader(in))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := snapshot.Write(&out, s, snapshot.JSON); err != nil {
			return // an object JSON cannot hold (a YAML map with a non-string key)
		}
		again, err := snapshot.Read(&out)
		require.NoError(t, err, "%s", out.String())
		assert.Equal(t, s.Len(), again.Len())
	})
}

// BenchmarkSnapshotRead is Read of a snapshot of 1,000 ConfigMaps in each format.
func BenchmarkSnapshotRead(b *testing.B) {
	s, err := snapshot.Take(context.Background(), seeded(b, 1000), nil)
	require.NoError(b, err)
	for _, f := range []snapshot.Format{snapshot.YAML, snapshot.JSON} {
		file := []byte(write(b, s, f))
		b.Run("format="+string(f), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(file)))
			for b.Loop() {
				if _, err := snapshot.Read(bytes.NewReader(file)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
