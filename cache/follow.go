package cache

import "context"

// Follow calls each with every event of a watch of what opts select, opening the watch again
// whenever it ends (it fell behind, or its history was compacted), until ctx is done or s
// refuses a watch (closed). It blocks until then. It is how a controller hears of changes to
// objects other than its own (children, pods, nodes) and enqueues what they concern; each
// runs on Follow's goroutine and must not block for long.
func Follow(ctx context.Context, s Watchable, opts WatchOptions, each func(Event)) {
	for ctx.Err() == nil {
		w, err := s.Watch(ctx, opts)
		if err != nil {
			return // ctx done, or the store closing
		}
		for ev := range w.Events() {
			each(ev)
		}
		w.Stop()
	}
}
