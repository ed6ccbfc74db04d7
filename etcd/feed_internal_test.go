package etcd

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
	"github.com/opemu/opemu/etcd/etcdtest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestRelistAfterCompaction: a feed whose watch cannot resume because etcd compacted past its
// revision lists again; the cache's watchers are closed with ErrGone (their clients list
// again) and the cache holds etcd's state, including what was written meanwhile.
func TestRelistAfterCompaction(t *testing.T) {
	t.Parallel()
	client := etcdtest.Start(t).Client(t)
	s, err := New(Config{Client: client, Prefix: "/relist"})
	require.NoError(t, err)
	t.Cleanup(s.Close)
	ctx := t.Context()
	_, err = s.Create(ctx, cachetest.Key("default", "x"), cachetest.App("x", 1), cache.WriteOptions{})
	require.NoError(t, err)
	w, err := s.Watch(ctx, cache.WatchOptions{})
	require.NoError(t, err)

	// The feed stops where it is, as when its watch breaks.
	s.stop()
	<-s.done
	from := s.c.ResourceVersion()
	for i := range 3 {
		_, err := client.Put(ctx, fmt.Sprintf("/relist/cloudnative.elide.dev/applications/default/y%d", i),
			fmt.Sprintf(`{"apiVersion":"cloudnative.elide.dev/v1","kind":"Application","metadata":{"name":"y%d","namespace":"default"},"spec":{"replicas":1,"image":"x"}}`, i))
		require.NoError(t, err)
	}
	resp, err := client.Get(ctx, "any")
	require.NoError(t, err)
	require.NoError(t, s.Compact(ctx, uint64(resp.Header.Revision)))
	if _, err := client.Get(ctx, "any", clientv3.WithRev(int64(from))); err == nil {
		// kine keeps its last --compact-min-retain (1000) revisions whatever it is asked.
		t.Skip("the endpoint kept the history it was asked to compact: there is nothing to re-list")
	}

	runCtx, stop := context.WithCancel(context.Background())
	s.stop, s.done = stop, make(chan struct{})
	go s.run(runCtx, int64(from))
	require.Eventually(t, func() bool { return s.Relists() == 1 }, 10*time.Second, 10*time.Millisecond)
	require.ErrorIs(t, cachetest.Closed(t, w, 5*time.Second), cache.ErrGone)
	res, err := s.List(ctx, cachetest.Applications)
	require.NoError(t, err)
	assert.Len(t, res.Items, 4)
	assert.Equal(t, uint64(resp.Header.Revision), s.StartResourceVersion())
	_, err = s.Watch(ctx, cache.WatchOptions{ResourceVersion: from})
	require.ErrorIs(t, err, cache.ErrGone, "versions before the refill are not served")
}
