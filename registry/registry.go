package registry

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/calls"
	"github.com/opemu/opemu/events"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/webhooks"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// EventRecorder records Events (*events.Recorder implements it).
type EventRecorder interface {
	Record(ctx context.Context, ev events.Event)
}

// Config configures a Store. Storage and Kinds are required; every other zero value is
// documented.
type Config struct {
	Storage cache.Interface
	Kinds   *kinds.Registry
	// Admission runs on every create and update (SPEC §6). Nil admits everything unchanged.
	Admission *webhooks.Chain
	// Events makes the recorder of the Events of client writes (SPEC §7) from the in-process
	// client it writes them with (the recorder writes through the write path it records for);
	// New calls it once. Nil records none.
	Events func(*Client) EventRecorder
	// ReadOnly, when set, names objects clients may not write (403): the file lease backend's
	// mirror Lease. opemu's own writes (Options.Internal) are not refused.
	ReadOnly func(key cache.Key) bool
	// Clock stamps creation and deletion timestamps. Nil means the real clock.
	Clock clock.PassiveClock
	// NewUID makes metadata.uid. Nil means a random UUID v4.
	NewUID func() string
	// MaxBody is the request body limit (MAX_BODY): a patched object may be at most twice it.
	// Zero means 3 MiB.
	MaxBody int64
	// Calls, when set, records the writes of the Clients (opemu's own components), marked
	// Internal (record.go). Nil records none.
	Calls *calls.Record
}

// Store is the write path of every kind. Create it with New.
type Store struct {
	cfg    Config
	events EventRecorder // nil: no write records Events

	// fieldManagers caches one server-side apply FieldManager per served kind and subresource.
	fieldManagers sync.Map // fieldManagerKey → *managedfields.FieldManager
	// emptyObjects caches the object a create's ownership is computed against, per kind.
	emptyObjects sync.Map // *kinds.Kind → map[string]any (never modified)
	// createEntries caches the managedFields a create of a custom resource gives, by kind,
	// manager and shape (createShape), at most maxCreateShapes of them.
	createEntries sync.Map // createShapeKey → []any (never modified)
	createShapes  atomic.Int64
	// eventFieldSets caches the fieldsV1 (as the store encodes it) of the recorder's Events,
	// which set the same fields but for two (eventManagedFields).
	eventFieldSets sync.Map // string → []byte
	// nsLocks are striped by namespace name: creates into a namespace hold its stripe shared
	// across their Terminating check and store write, a namespace's deletion holds it
	// exclusively while it marks the namespace, so no object slips into a Terminating
	// namespace.
	nsLocks [64]sync.RWMutex
	nsSeed  maphash.Seed
}

// New validates cfg.
func New(cfg Config) (*Store, error) {
	if cfg.Storage == nil || cfg.Kinds == nil {
		return nil, errors.New("registry: Storage and Kinds are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.RealClock{}
	}
	if cfg.NewUID == nil {
		cfg.NewUID = uuid.NewString
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = defaultMaxBody
	}
	boundJSONPatchCopies()
	s := &Store{cfg: cfg, nsSeed: maphash.MakeSeed()}
	if cfg.Events != nil {
		s.events = cfg.Events(s.Client("opemu-events"))
	}
	return s, nil
}

// storeOptions are the store's options of a write of an object of k: its kind's TTL.
func storeOptions(k *kinds.Kind, o Options) cache.WriteOptions {
	return cache.WriteOptions{DryRun: o.DryRun, TTL: k.TTL}
}

// Target is what a request is about: the kind, the object (Key.Name empty for a collection or
// a create) and the subresource ("", "status" or "scale").
type Target struct {
	Kind *kinds.Kind
	Key  cache.Key
	Sub  string
}

// GroupResource is the target's resource, as Status messages name it.
func (t Target) GroupResource() schema.GroupResource {
	return schema.GroupResource{Group: t.Kind.Group, Resource: t.Kind.Plural}
}

// TargetOf returns the target of key's object, in its resource's storage version.
func (s *Store) TargetOf(key cache.Key) (Target, error) {
	k, ok := s.cfg.Kinds.Resource(key.GroupResource())
	if !ok {
		return Target{}, apierrors.NewNotFound(schema.GroupResource{Group: key.Group, Resource: key.Resource}, key.Name)
	}
	return Target{Kind: k, Key: key}, nil
}

// Options are what every write takes from its request.
type Options struct {
	DryRun bool
	// FieldValidation is "Ignore", "Warn" or "Strict". Empty means Warn.
	FieldValidation string
	FieldManager    string
	// Force takes over fields other managers own (server-side apply only).
	Force bool
	// UserAgent names the manager of an update without FieldManager, as in Kubernetes.
	UserAgent string
	// User is the authenticated user making the write (the source of its Events); empty for
	// anonymous requests and opemu's own writes.
	User string
	// UserUID and UserGroups are that user's uid and groups, as its authenticator gave them
	// (the admission chain's userInfo); no groups: system:authenticated.
	UserUID    string
	UserGroups []string
	// Internal marks a write by opemu itself (controller, recorder, elector): it records no
	// Events of its own and may write read-only objects.
	Internal bool
	// PropagationPolicy is a delete's DeleteOptions.propagationPolicy (the legacy
	// orphanDependents is Orphan when true, Background when false): Orphan gives the object
	// the orphan finalizer, Foreground the foregroundDeletion finalizer, Background neither,
	// for the garbage collector to act on. Empty keeps the garbage-collection finalizer the
	// object has, if any (kube-apiserver's deletionFinalizersForGarbageCollection).
	PropagationPolicy metav1.DeletionPropagation
	// GracePeriodSeconds is a delete's DeleteOptions.gracePeriodSeconds: for a kind deleted
	// gracefully (kinds.Kind.GracePeriod), how long the object has; nil lets the kind decide.
	GracePeriodSeconds *int64
	// applying marks a server-side apply: ownership is already recorded.
	applying bool
	// tracked marks a write through a view (view.go), whose ownership the view records.
	tracked bool
	// decoded says how the object was decoded from the request: the write path then neither
	// prunes it again nor words its decoding errors otherwise than kube-apiserver's decoder
	// (decode.go). quote is what a 422 about a patch's result quotes.
	decoded decodedBy
	quote   func() string
}

// Result is what a successful write hands back.
type Result struct {
	// Object is the stored object (for a dry run, what would have been stored).
	Object   *cache.Object
	Warnings []string
	// Changed is false for an update that changed nothing (no new version).
	Changed bool
	// Created says a PATCH (server-side apply) created the object.
	Created bool
}

// checkWritable refuses client writes to objects the server owns (the mirrored Lease).
func (s *Store) checkWritable(t Target, key cache.Key, o Options) error {
	if !o.Internal && s.cfg.ReadOnly != nil && s.cfg.ReadOnly(key) {
		return apierrors.NewForbidden(t.GroupResource(), key.Name,
			errors.New("this Lease mirrors the file lease backend and is written only by the elector"))
	}
	return nil
}

func badRequest(format string, args ...any) error {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}
