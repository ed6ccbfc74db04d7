package cache_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestMirror: the whole set is published once the initial list is in, then after each change;
// closing the store ends Mirror with nil.
func TestMirror(t *testing.T) {
	t.Parallel()
	s := cache.New(cache.Config{})
	ctx := context.Background()
	for _, name := range []string{"a", "b"} {
		_, err := s.Create(ctx, cachetest.Key("default", name), cachetest.App(name, 1), cache.WriteOptions{})
		require.NoError(t, err)
	}
	sets := make(chan []string, 16)
	done := make(chan error, 1)
	go func() {
		done <- cache.Mirror(ctx, s, cache.WatchOptions{Resources: []cache.GroupResource{cachetest.Applications}}, func(m map[cache.Key]*cache.Object) {
			var names []string
			for k := range maps.Keys(m) {
				names = append(names, k.Name)
			}
			slices.Sort(names)
			sets <- names
		}, nil)
	}()
	next := func() []string {
		t.Helper()
		select {
		case n := <-sets:
			return n
		case <-time.After(5 * time.Second):
			t.Fatal("nothing published within 5 s")
			return nil
		}
	}
	assert.Equal(t, []string{"a", "b"}, next(), "the initial list, published once it is complete")
	_, err := s.Create(ctx, cachetest.Key("default", "c"), cachetest.App("c", 1), cache.WriteOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c"}, next())
	_, err = s.Delete(ctx, cachetest.Key("default", "a"), cache.Preconditions{}, cache.WriteOptions{})
	require.NoError(t, err)
	assert.Equal(t, []string{"b", "c"}, next())
	s.Close()
	select {
	case err := <-done:
		assert.NoError(t, err, "a closed store ends Mirror")
	case <-time.After(5 * time.Second):
		t.Fatal("Mirror did not return after Close")
	}
}
