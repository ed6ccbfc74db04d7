package snapshot

import (
	"context"
	"fmt"
	"time"

	"github.com/opemu/opemu/cache"
)

// UIDAnnotation carries an object's metadata.uid in a snapshot's file. kube-apiserver refuses
// an apply that changes the uid of an object it has ("field is immutable") and ignores a uid
// on create, so a file for kubectl apply -f carries none; opemu's restore moves the annotation
// back to metadata.uid, so uids (and the ownerReferences naming them) survive a round trip.
const UIDAnnotation = "snapshot.opemu.dev/uid"

// Snapshot is a cluster's state at one moment: its objects and the server's clock. It is
// taken from a store (Take: the objects as stored, restored as they are) or read from a file
// (Read: documents, checked when restored). The zero value is an empty snapshot.
type Snapshot struct {
	// Clock is the server's time when the snapshot was taken; zero when unknown (a file
	// without opemu's header).
	Clock time.Time
	// ManualClock says the server's clock was manual (CLOCK=manual), so a restore into a
	// server with a manual clock may set it to Clock (SPEC §16).
	ManualClock bool
	// ResourceVersion is the version the objects were read at, for the reader's information:
	// a restore gives them versions of its own.
	ResourceVersion uint64

	objects []*cache.Object  // taken from a store, in key order
	docs    []map[string]any // read from a file, in its order
}

// Len is how many objects the snapshot holds.
func (s *Snapshot) Len() int { return len(s.objects) + len(s.docs) }

// Take reads every object of store at one version (a consistent read, then a watch-list), but
// those skip names (nil: none): the objects a running server owns and a snapshot never
// holds. The snapshot's Clock is left for the caller.
func Take(ctx context.Context, store cache.Interface, skip func(cache.Key) bool) (*Snapshot, error) {
	if err := store.WaitUntilFresh(ctx, 0); err != nil {
		return nil, err
	}
	w, err := store.Watch(ctx, cache.WatchOptions{SendInitialEvents: true})
	if err != nil {
		return nil, err
	}
	defer w.Stop()
	s := &Snapshot{}
	for ev := range w.Events() {
		if ev.Type == cache.Bookmark {
			s.ResourceVersion = ev.ResourceVersion
			return s, nil
		}
		if skip == nil || !skip(ev.Object.Key()) {
			s.objects = append(s.objects, ev.Object)
		}
	}
	return nil, fmt.Errorf("snapshot: the store's watch-list ended before its last object: %w", w.Err())
}
