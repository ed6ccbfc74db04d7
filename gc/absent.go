package gc

import (
	"strings"
	"sync"
)

// absentLimit bounds the absent owners remembered (kube's garbage collector keeps 500).
const absentLimit = 1024

// absentKey is an owner known not to exist: no object of the group and kind has the uid in
// the namespace ("" for a cluster-scoped kind). A uid is never reused, so an absence never
// ends. The kind and namespace are part of the key, as in Kubernetes' absent owner cache,
// because a reference may name the wrong kind for a uid that does exist, and a cluster-scoped
// dependent's reference to a namespaced kind must never find the absence of an owner in some
// namespace. (Only a restored snapshot brings a uid back, between two runs of the collector,
// each of which starts with none remembered.) It holds no version: a kind's objects are the same whatever version names them.
type absentKey struct {
	group, kind, uid, namespace string
}

// ownerKey is the absentKey of an owner reference looked up in namespace ns.
func ownerKey(r ref, ns string) absentKey {
	group := ""
	if i := strings.LastIndex(r.APIVersion, "/"); i >= 0 {
		group = r.APIVersion[:i]
	}
	return absentKey{group, r.Kind, r.UID, ns}
}

// absent remembers recently confirmed absent owners, so that the dependents of an owner that
// just went (all of them are looked at then) need no lookup each. It forgets the oldest beyond
// absentLimit. It is safe for concurrent use.
type absent struct {
	mu    sync.Mutex
	set   map[absentKey]struct{}
	order []absentKey // oldest first
}

func (a *absent) add(k absentKey) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.set == nil {
		a.set = map[absentKey]struct{}{}
	}
	if _, ok := a.set[k]; ok {
		return
	}
	if len(a.order) >= absentLimit {
		delete(a.set, a.order[0])
		a.order = append(a.order[:0], a.order[1:]...)
	}
	a.set[k] = struct{}{}
	a.order = append(a.order, k)
}

// reset forgets every absence.
func (a *absent) reset() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.set, a.order = nil, nil
}

func (a *absent) has(k absentKey) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.set[k]
	return ok
}
