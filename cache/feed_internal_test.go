package cache

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestApplyAndReplace: an externally fed cache applies changes at the source's versions and
// sends them to watchers; Replace closes them with ErrGone.
func TestApplyAndReplace(t *testing.T) {
	t.Parallel()
	c := NewWatchCache(Config{StartResourceVersion: 10})
	key := Key{Group: "g", Resource: "r", Namespace: "ns", Name: "a"}
	enc, err := c.Encode(key, map[string]any{"metadata": map[string]any{"name": "a", "resourceVersion": "3"}})
	require.NoError(t, err)
	assert.Zero(t, enc.ResourceVersion())
	assert.NotContains(t, string(enc.Raw()), "resourceVersion")
	w, err := c.Watch(t.Context(), WatchOptions{})
	require.NoError(t, err)
	at12, err := c.AtVersion(enc, 12)
	require.NoError(t, err)
	stored, err := c.Stored(key, enc.Raw(), 15)
	require.NoError(t, err)
	require.NoError(t, c.Apply([]Change{{Key: key, Object: at12, ResourceVersion: 12}, {Key: key, Object: stored, ResourceVersion: 15}, {Key: key, ResourceVersion: 17}}))
	var got []string
	for range 3 {
		ev := <-w.Events()
		got = append(got, string(ev.Type)+" "+formatRV(ev.ResourceVersion)+" "+formatRV(ev.Object.ResourceVersion()))
	}
	assert.Equal(t, []string{"ADDED 12 12", "MODIFIED 15 15", "DELETED 17 17"}, got)
	assert.Equal(t, uint64(17), c.ResourceVersion())
	require.NoError(t, c.WaitUntil(t.Context(), 17))

	c.Advance(20)
	assert.Equal(t, uint64(20), c.ResourceVersion())
	require.NoError(t, c.Replace([]*Object{stored}, 30))
	for range w.Events() {
	}
	require.ErrorIs(t, w.Err(), ErrGone)
	assert.Equal(t, uint64(30), c.StartResourceVersion())
	_, err = c.Watch(t.Context(), WatchOptions{ResourceVersion: 20})
	require.ErrorIs(t, err, ErrGone, "older than the refill")
	o, err := c.Get(t.Context(), key)
	require.NoError(t, err)
	assert.Same(t, stored, o)
}
