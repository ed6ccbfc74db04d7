package events

import (
	"cmp"
	"time"

	"github.com/opemu/opemu/kinds"
	"k8s.io/utils/clock"
)

// The defaults of EVENT_TTL and EVENT_LIMIT.
const (
	DefaultTTL   = time.Hour
	DefaultLimit = 10000
)

// KindConfig configures the rules of the Event kind. Zero values are documented defaults.
type KindConfig struct {
	// TTL is how long an Event lives after its last write (EVENT_TTL, kube-apiserver's
	// --event-ttl). Zero means DefaultTTL.
	TTL time.Duration
	// Limit, when positive, is the most Events kept (EVENT_LIMIT): before each new one the
	// oldest by lastTimestamp go. Zero means no limit: on etcd each Event's lease alone bounds
	// them, as kube-apiserver bounds them (SPEC §12).
	Limit int
	// Clock dates, for the limit's order, an Event that says nothing of when it was seen. Nil
	// means the real clock.
	Clock clock.PassiveClock
}

// Kind is the v1 Event kind (kinds.EventKind) carrying the rules of Events: their TTL (on etcd,
// a lease; over the in-memory store, Recorder.Run expires them) and, when cfg.Limit is set,
// the limit. Serve it in place of the built-in one: kinds.New(events.Kind(cfg)).
func Kind(cfg KindConfig) *kinds.Kind {
	k := kinds.EventKind()
	k.TTL = cmp.Or(cfg.TTL, DefaultTTL)
	if cfg.Limit > 0 {
		k.Limit = newLimit(cfg.Limit, cfg.Clock)
	}
	return k
}
