package cache

import (
	"bytes"
	"context"
	"hash/maphash"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/fields"
)

// Config configures a Store. The zero value is ready to use.
type Config struct {
	// WatchHistory is how many watch events are kept per resource for resuming a watch from a
	// resourceVersion. Zero means 10000.
	WatchHistory int
	// WatchBuffer is how many undelivered events a watcher may hold, beyond its initial replay,
	// before it is closed with ErrTooSlow. Zero means 1024.
	WatchBuffer int
	// StartResourceVersion is the counter's first value. Zero means the current time in
	// microseconds since the epoch, so versions from an earlier run are older than this run's.
	StartResourceVersion uint64
	// Now stamps creation and deletion timestamps. Nil means time.Now.
	Now func() time.Time
	// NewUID makes metadata.uid. Nil means a random UUID v4.
	NewUID func() string
	// SelectableFields returns the extra field-selector fields of an object (beyond
	// metadata.name and metadata.namespace), e.g. involvedObject.name for Events. It is called
	// on every write with the decoded object; it must not keep or modify it. Nil means none.
	SelectableFields func(gr GroupResource, obj map[string]any) fields.Set
	// Namespaces are created at start. Nil means ["default"].
	Namespaces []string
}

// ProtectedNamespace cannot be deleted.
const ProtectedNamespace = "default"

// Store is the in-memory object store. See the package doc for its guarantees.
type Store struct {
	cfg     Config
	seed    maphash.Seed
	startRV uint64

	// mu guards everything below. Writers hold it exclusively while they apply a write, append
	// it to history and hand it to watchers (non-blocking sends only), so events are ordered.
	mu        sync.RWMutex
	rv        uint64
	resources map[GroupResource]*resourceState
	watchers  map[*Watcher]struct{}
	closed    bool
}

// resourceState is one resource's objects (by namespace, then name) and watch history.
type resourceState struct {
	byNS    map[string]map[string]*Object
	history history
}

// New returns a store whose namespaces from cfg already exist.
func New(cfg Config) *Store {
	if cfg.WatchHistory <= 0 {
		cfg.WatchHistory = 10000
	}
	if cfg.WatchBuffer <= 0 {
		cfg.WatchBuffer = 1024
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.NewUID == nil {
		cfg.NewUID = uuid.NewString
	}
	if cfg.StartResourceVersion == 0 {
		cfg.StartResourceVersion = uint64(time.Now().UnixMicro())
	}
	if cfg.Namespaces == nil {
		cfg.Namespaces = []string{ProtectedNamespace}
	}
	s := &Store{
		cfg:       cfg,
		seed:      maphash.MakeSeed(),
		startRV:   cfg.StartResourceVersion,
		rv:        cfg.StartResourceVersion,
		resources: map[GroupResource]*resourceState{},
		watchers:  map[*Watcher]struct{}{},
	}
	s.mu.Lock()
	for _, ns := range cfg.Namespaces {
		_ = s.ensureNamespaceLocked(ns)
	}
	s.mu.Unlock()
	return s
}

// ResourceVersion returns the counter: the version of the latest write.
func (s *Store) ResourceVersion() uint64 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.rv
}

// StartResourceVersion returns the counter's value when the store was made; versions below it
// were issued by an earlier run.
func (s *Store) StartResourceVersion() uint64 { return s.startRV }

func (s *Store) now() string { return s.cfg.Now().UTC().Format(time.RFC3339) }

func (s *Store) stateLocked(gr GroupResource) *resourceState {
	st := s.resources[gr]
	if st == nil {
		st = &resourceState{byNS: map[string]map[string]*Object{}}
		st.history.init(s.cfg.WatchHistory, s.startRV)
		s.resources[gr] = st
	}
	return st
}

func (s *Store) getLocked(key Key) *Object {
	st := s.resources[key.GroupResource()]
	if st == nil {
		return nil
	}
	return st.byNS[key.Namespace][key.Name]
}

// Get returns the object at key, or an error wrapping ErrNotFound.
func (s *Store) Get(_ context.Context, key Key) (*Object, error) {
	s.mu.RLock()
	o := s.getLocked(key)
	s.mu.RUnlock()
	if o == nil {
		return nil, newErr(ErrNotFound, key, "")
	}
	return o, nil
}

// WriteOptions modify a create, update or delete.
type WriteOptions struct {
	// DryRun runs every check and returns the would-be result without storing anything,
	// bumping the counter, emitting an event or creating a namespace. A dry-run create's result
	// has no resourceVersion.
	DryRun bool
}

// Create stores obj at key and returns the stored object (an ADDED event). The store takes
// ownership of obj and stamps its metadata: name and namespace from key, a new uid,
// creationTimestamp, resourceVersion and generation 1; deletionTimestamp is dropped. When
// key.Name is empty, metadata.generateName plus 5 random characters names the object. The
// namespace is created if missing; a Terminating namespace refuses new objects (ErrForbidden).
func (s *Store) Create(_ context.Context, key Key, obj map[string]any, opts WriteOptions) (*Object, error) {
	md := metadataOf(obj)
	// The key outlives the request: share the repeated parts, and copy the name so it does not
	// hold on to the request's buffers.
	key = Key{Group: intern(key.Group), Resource: intern(key.Resource), Namespace: intern(key.Namespace), Name: strings.Clone(key.Name)}
	var pre *Object
	if key.Name != "" {
		// Encode outside the lock, with a placeholder version stamped under it.
		stampCreate(s, key, md)
		md["resourceVersion"] = rvPlaceholder
		o, err := s.build(key, obj)
		if err != nil {
			return nil, err
		}
		pre = o
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, newErr(ErrClosed, key, "")
	}
	if key.Name == "" {
		prefix := stringField(md, "generateName")
		if prefix == "" {
			return nil, &Error{Err: ErrInvalid, Key: key, Field: "metadata.name", Message: "name or generateName is required"}
		}
		key.Name = s.generateNameLocked(key, prefix)
		stampCreate(s, key, md)
	}
	if key.Namespace != "" {
		if ns := s.getLocked(namespaceKey(key.Namespace)); ns != nil && ns.deleting {
			return nil, newErr(ErrForbidden, key, "unable to create new content in namespace %s because it is being terminated", key.Namespace)
		}
	}
	if s.getLocked(key) != nil {
		return nil, newErr(ErrAlreadyExists, key, "")
	}
	if opts.DryRun {
		delete(md, "resourceVersion")
		return s.build(key, obj)
	}
	if key.Namespace != "" {
		if err := s.ensureNamespaceLocked(key.Namespace); err != nil {
			return nil, err
		}
	}
	o := withVersion(pre, rvPlaceholder, s.rv+1)
	if o == nil {
		md["resourceVersion"] = formatRV(s.rv + 1)
		var err error
		if o, err = s.build(key, obj); err != nil {
			return nil, err
		}
	}
	s.commitLocked(Added, o, nil)
	return o, nil
}

// stampCreate sets the metadata a create gives: name and namespace from key, a new uid,
// creationTimestamp and generation 1, and no deletion.
func stampCreate(s *Store, key Key, md map[string]any) {
	md["name"] = key.Name
	if key.Namespace != "" {
		md["namespace"] = key.Namespace
	} else {
		delete(md, "namespace")
	}
	md["uid"] = s.cfg.NewUID()
	md["creationTimestamp"] = s.now()
	md["generation"] = int64(1)
	delete(md, "deletionTimestamp")
	delete(md, "deletionGracePeriodSeconds")
}

// rvPlaceholder is the resourceVersion an object is encoded with outside the store's lock;
// withVersion puts the real one in its place under the lock.
const rvPlaceholder = "18446744073709551615"

var rvPlaceholderField = versionField(rvPlaceholder)

func versionField(rv string) []byte { return []byte(`"resourceVersion":"` + rv + `"`) }

// withVersion returns a copy of o, whose encoding holds resourceVersion from, as stored at
// version rv, by replacing the version in the encoding; nil when o is nil or its encoding holds
// that field text more than once (say, also as an annotation) and only a full encode is safe.
func withVersion(o *Object, from string, rv uint64) *Object {
	old := versionField(from)
	if o == nil || bytes.Count(o.raw, old) != 1 {
		return nil
	}
	next := *o
	next.rv = rv
	next.raw = bytes.Replace(o.raw, old, versionField(formatRV(rv)), 1)
	return &next
}

const nameChars = "bcdfghjklmnpqrstvwxz2456789"

func (s *Store) generateNameLocked(key Key, prefix string) string {
	const maxPrefix = 253 - 5
	if len(prefix) > maxPrefix {
		prefix = prefix[:maxPrefix]
	}
	for {
		b := []byte(prefix)
		for range 5 {
			b = append(b, nameChars[rand.IntN(len(nameChars))])
		}
		key.Name = string(b)
		if s.getLocked(key) == nil {
			return key.Name
		}
	}
}

// Update replaces the object at key with obj and returns the stored object. The store takes
// ownership of obj. If obj carries metadata.resourceVersion it must equal the stored one
// (ErrConflict); without it the update is unconditional. name, namespace, uid,
// creationTimestamp and deletionTimestamp are kept from the stored object; generation moves
// when anything outside metadata and status changed. While the object is being deleted no
// finalizer may be added (ErrInvalid), and an update that leaves no finalizers removes it (a
// DELETED event). An update that changes nothing is not a write: the stored object is returned
// unchanged and no event is emitted.
func (s *Store) Update(_ context.Context, key Key, obj map[string]any, opts WriteOptions) (*Object, error) {
	md := metadataOf(obj)
	want := stringField(md, "resourceVersion")
	// Optimistic: prepare and encode against the current object outside the lock, then commit
	// under it if that object is still current, or prepare again.
	for {
		s.mu.RLock()
		closed, cur := s.closed, s.getLocked(key)
		s.mu.RUnlock()
		if closed {
			return nil, newErr(ErrClosed, key, "")
		}
		if cur == nil {
			return nil, newErr(ErrNotFound, key, "")
		}
		o, removing, err := s.prepareUpdate(key, cur, obj, md, want)
		if err != nil || o == cur {
			return o, err
		}
		if opts.DryRun {
			md["resourceVersion"] = formatRV(cur.rv)
			return s.build(key, obj)
		}
		s.mu.Lock()
		if s.closed || s.getLocked(key) != cur {
			s.mu.Unlock()
			continue
		}
		stamped := withVersion(o, rvPlaceholder, s.rv+1)
		if stamped == nil {
			md["resourceVersion"] = formatRV(s.rv + 1)
			if stamped, err = s.build(key, obj); err != nil {
				s.mu.Unlock()
				return nil, err
			}
		}
		if removing {
			s.commitLocked(Deleted, stamped, cur)
		} else {
			s.commitLocked(Modified, stamped, cur)
		}
		s.mu.Unlock()
		return stamped, nil
	}
}

// prepareUpdate checks obj against cur and encodes it as the next version of cur, with
// rvPlaceholder for its resourceVersion. It returns cur itself when the update changes
// nothing, and whether the update removes the object (the last finalizer of one being deleted).
func (s *Store) prepareUpdate(key Key, cur *Object, obj, md map[string]any, want string) (*Object, bool, error) {
	if want != "" {
		rv, err := ParseResourceVersion(want)
		if err != nil {
			return nil, false, &Error{Err: ErrInvalid, Key: key, Field: "metadata.resourceVersion", Message: "must be a decimal resourceVersion"}
		}
		if rv != cur.rv {
			return nil, false, newErr(ErrConflict, key, "the object has been modified; please apply your changes to the latest version and try again")
		}
	}
	old, err := cur.Decode()
	if err != nil {
		return nil, false, err
	}
	oldMD := metadataOf(old)
	for _, f := range []string{"name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds"} {
		if v, ok := oldMD[f]; ok {
			md[f] = v
		} else {
			delete(md, f)
		}
	}
	gen := cur.generation
	if s.specHash(obj) != cur.specHash {
		gen++
	}
	md["generation"] = gen
	finalizers := stringSlice(md["finalizers"])
	if cur.deleting {
		var added []string
		for _, f := range finalizers {
			if !slices.Contains(cur.finalizers, f) {
				added = append(added, f)
			}
		}
		if len(added) > 0 {
			return nil, false, &Error{Err: ErrInvalid, Key: key, Field: "metadata.finalizers",
				Message: "no new finalizers can be added if the object is being deleted, found new finalizers [" + strings.Join(added, " ") + "]"}
		}
	}
	md["resourceVersion"] = rvPlaceholder
	o, err := s.build(key, obj)
	if err != nil {
		return nil, false, err
	}
	removing := cur.deleting && len(finalizers) == 0
	if !removing && sameButVersion(o.raw, cur.raw, formatRV(cur.rv)) {
		return cur, false, nil
	}
	return o, removing, nil
}

// sameButVersion reports whether next (encoded with rvPlaceholder) equals cur (encoded at
// version curRV) in everything but the version.
func sameButVersion(next, cur []byte, curRV string) bool {
	i := bytes.Index(next, rvPlaceholderField)
	if i < 0 {
		return false
	}
	curField := string(versionField(curRV))
	rest := next[i+len(rvPlaceholderField):]
	return len(cur) == i+len(curField)+len(rest) &&
		bytes.Equal(cur[:i], next[:i]) && string(cur[i:i+len(curField)]) == curField && bytes.Equal(cur[i+len(curField):], rest)
}

// Preconditions must hold for a delete to proceed (ErrConflict otherwise). Empty means any.
type Preconditions struct {
	UID             string
	ResourceVersion string
}

// Delete deletes the object at key. An object with finalizers is only marked: deletionTimestamp
// is set and generation bumped (a MODIFIED event), and it goes when an update empties its
// finalizers; deleting a marked object again changes nothing. Otherwise it is removed at once
// (a DELETED event carrying the deletion's resourceVersion). removed says which happened; the
// object returned is its state after the call. Deleting a namespace marks it Terminating and
// deletes its objects; it goes once they are gone. The namespace "default" cannot be deleted.
func (s *Store) Delete(_ context.Context, key Key, pre Preconditions, opts WriteOptions) (obj *Object, removed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, false, newErr(ErrClosed, key, "")
	}
	cur := s.getLocked(key)
	if cur == nil {
		return nil, false, newErr(ErrNotFound, key, "")
	}
	if pre.UID != "" && pre.UID != cur.uid {
		return nil, false, newErr(ErrConflict, key, "the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", pre.UID, cur.uid)
	}
	if pre.ResourceVersion != "" && pre.ResourceVersion != formatRV(cur.rv) {
		return nil, false, newErr(ErrConflict, key, "the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%d). The object might have been modified", pre.ResourceVersion, cur.rv)
	}
	if key.GroupResource() == NamespacesResource {
		return s.deleteNamespaceLocked(cur, opts)
	}
	return s.deleteLocked(cur, opts)
}

// deleteLocked marks or removes cur (see Delete).
func (s *Store) deleteLocked(cur *Object, opts WriteOptions) (*Object, bool, error) {
	if cur.deleting {
		return cur, false, nil
	}
	if len(cur.finalizers) > 0 {
		mark := func(obj map[string]any) {
			md := metadataOf(obj)
			md["deletionTimestamp"] = s.now()
			md["deletionGracePeriodSeconds"] = int64(0)
			md["generation"] = cur.generation + 1
		}
		o, err := s.rewriteLocked(cur, Modified, opts.DryRun, mark)
		return o, false, err
	}
	if opts.DryRun {
		return cur, true, nil
	}
	if o := withVersion(cur, formatRV(cur.rv), s.rv+1); o != nil {
		s.commitLocked(Deleted, o, cur)
		return o, true, nil
	}
	o, err := s.rewriteLocked(cur, Deleted, false, nil)
	return o, err == nil, err
}

// rewriteLocked writes cur again, changed by mutate (may be nil), as an event of type t with
// the next resourceVersion; for a dry run it only returns the would-be object.
func (s *Store) rewriteLocked(cur *Object, t EventType, dryRun bool, mutate func(obj map[string]any)) (*Object, error) {
	obj, err := cur.Decode()
	if err != nil {
		return nil, err
	}
	if mutate != nil {
		mutate(obj)
	}
	if dryRun {
		return s.build(cur.key, obj)
	}
	metadataOf(obj)["resourceVersion"] = formatRV(s.rv + 1)
	o, err := s.build(cur.key, obj)
	if err != nil {
		return nil, err
	}
	s.commitLocked(t, o, cur)
	return o, nil
}

// commitLocked applies one write: it takes the next resourceVersion (o must already carry it),
// updates the index, appends to the resource's history and hands the event to watchers. When a
// removal empties a Terminating namespace, the namespace goes too.
func (s *Store) commitLocked(t EventType, o, prev *Object) {
	s.rv++
	st := s.stateLocked(o.key.GroupResource())
	ns := st.byNS[o.key.Namespace]
	if t == Deleted {
		delete(ns, o.key.Name)
		if len(ns) == 0 {
			delete(st.byNS, o.key.Namespace)
		}
	} else {
		if ns == nil {
			ns = map[string]*Object{}
			st.byNS[o.key.Namespace] = ns
		}
		ns[o.key.Name] = o
	}
	ev := Event{Type: t, Object: o, ResourceVersion: s.rv, prev: prev}
	st.history.add(ev)
	s.dispatchLocked(ev)
	if t == Deleted && o.key.Namespace != "" {
		s.finishNamespaceLocked(o.key.Namespace)
	}
}

// Close closes every watcher with ErrClosed and refuses further writes. It is idempotent.
func (s *Store) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	for w := range s.watchers {
		s.closeWatcherLocked(w, ErrClosed)
	}
}

// DropResource removes every object of gr at once (a DELETED event each, finalizers
// notwithstanding) and ends the watches on gr alone, as deleting a CRD does. It returns how
// many objects went.
func (s *Store) DropResource(_ context.Context, gr GroupResource) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return 0, newErr(ErrClosed, Key{Group: gr.Group, Resource: gr.Resource}, "")
	}
	st := s.resources[gr]
	n := 0
	if st != nil {
		var all []*Object
		for _, m := range st.byNS {
			all = append(all, sortedObjects(m)...)
		}
		for _, cur := range all {
			if _, err := s.rewriteLocked(cur, Deleted, false, nil); err != nil {
				return n, err
			}
			n++
		}
	}
	for w := range s.watchers {
		if len(w.opts.Resources) == 1 && w.opts.Resources[0] == gr {
			s.closeWatcherLocked(w, ErrClosed)
		}
	}
	return n, nil
}
