package gc

import (
	"bytes"
	"encoding/json"
	"slices"

	"github.com/opemu/opemu/cache"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ref is one entry of metadata.ownerReferences.
type ref struct {
	APIVersion, Kind, Name, UID string
	Block                       bool // blockOwnerDeletion
}

// node is one uid of the graph: an object the collector has seen, or only a uid some
// dependent names as its owner (not observed).
type node struct {
	uid      string
	key      cache.Key // valid when observed
	observed bool      // the object was seen in the store and not seen deleted since
	owners   []ref     // its ownerReferences
	deleting bool      // metadata.deletionTimestamp is set
	orphan   bool      // it has the orphan finalizer
	// foreground says it has the foregroundDeletion finalizer.
	foreground bool
	// dependents are the uids of the objects that name this uid as an owner.
	dependents map[string]struct{}
}

// deletingDependents says the collector must delete this owner's dependents before it goes.
func (n *node) deletingDependents() bool { return n.observed && n.deleting && n.foreground }

// orphaning says the collector must orphan this owner's dependents before it goes.
func (n *node) orphaning() bool { return n.observed && n.deleting && n.orphan }

// graph is the owner → dependents graph by uid. It holds only the nodes that matter to the
// collector: objects with ownerReferences, the uids they name, and objects with a
// garbage-collection finalizer; any other object is not kept. Its methods expect the
// Collector's mu held.
type graph struct {
	nodes map[string]*node
	// gone is told of every owner seen deleted (the collector's absent owners).
	gone func(absentKey)
}

func newGraph(gone func(absentKey)) *graph {
	return &graph{nodes: map[string]*node{}, gone: gone}
}

// apply updates the graph with one watch event and returns the uids the collector must look
// at: a dependent whose owners changed (or every dependent, on the initial list: a full
// resync), an owner that starts deleting its dependents (and its dependents) or orphaning
// them, an owner waiting for a dependent that went or stopped blocking it, and the dependents
// of an owner that went.
func (g *graph) apply(ev cache.Event, initial bool) []string {
	obj := ev.Object
	uid := obj.UID()
	if ev.Type == cache.Deleted {
		return g.remove(obj, uid)
	}
	orphan, foreground := finalizersOf(obj.Finalizers())
	var owners []ref
	if mayHaveOwners(obj.Raw()) {
		owners = ownersOf(obj.Raw())
	}
	n := g.nodes[uid]
	if n == nil {
		if len(owners) == 0 && !orphan && !foreground {
			return nil
		}
		n = &node{uid: uid}
		g.nodes[uid] = n
	}
	var out []string
	wasDD, wasOrphaning := n.deletingDependents(), n.orphaning()
	old := n.owners
	n.key, n.observed, n.owners = obj.Key(), true, owners
	n.deleting, n.orphan, n.foreground = obj.Deleting(), orphan, foreground
	if changed := !slices.Equal(old, owners); changed || initial {
		if len(owners) > 0 {
			out = append(out, uid)
		}
		// Unlink the owners it no longer names (an owner waiting for it may go now), link
		// the new ones.
		for _, r := range old {
			if slices.Contains(owners, r) {
				continue
			}
			if o := g.nodes[r.UID]; o != nil {
				if !slices.ContainsFunc(owners, func(x ref) bool { return x.UID == r.UID }) {
					delete(o.dependents, uid)
				}
				if o.deletingDependents() {
					out = append(out, o.uid)
				}
				g.tidy(o)
			}
		}
		for _, r := range owners {
			o := g.nodes[r.UID]
			if o == nil {
				o = &node{uid: r.UID}
				g.nodes[r.UID] = o
			}
			if o.dependents == nil {
				o.dependents = map[string]struct{}{}
			}
			o.dependents[uid] = struct{}{}
		}
	}
	if n.deletingDependents() && (!wasDD || initial) {
		out = append(out, uid)
		for d := range n.dependents {
			out = append(out, d)
		}
	}
	if n.orphaning() && (!wasOrphaning || initial) {
		out = append(out, uid)
	}
	g.tidy(n)
	return out
}

// remove takes a deleted object out of the graph: the owners waiting for it are looked at
// again, and so are its dependents (their owner is gone).
func (g *graph) remove(obj *cache.Object, uid string) []string {
	n := g.nodes[uid]
	if n == nil {
		return nil
	}
	var out []string
	for _, r := range n.owners {
		if o := g.nodes[r.UID]; o != nil {
			delete(o.dependents, uid)
			if o.deletingDependents() {
				out = append(out, o.uid)
			}
			g.tidy(o)
		}
	}
	if g.gone != nil && len(n.dependents) > 0 {
		var tm struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if json.Unmarshal(obj.Raw(), &tm) == nil {
			g.gone(ownerKey(ref{APIVersion: tm.APIVersion, Kind: tm.Kind, UID: uid}, obj.Key().Namespace))
		}
	}
	for d := range n.dependents {
		out = append(out, d)
	}
	n.observed, n.owners, n.deleting, n.orphan, n.foreground = false, nil, false, false, false
	g.tidy(n)
	return out
}

// tidy forgets n when nothing about it matters any more.
func (g *graph) tidy(n *node) {
	if len(n.dependents) == 0 && (!n.observed || (len(n.owners) == 0 && !n.orphan && !n.foreground)) {
		delete(g.nodes, n.uid)
	}
}

// dependent is what the collector needs of one dependent of an owner.
type dependent struct {
	uid   string
	key   cache.Key
	block bool // its reference to the owner blocks the owner's deletion
}

// dependentsOf returns the observed dependents of uid.
func (g *graph) dependentsOf(uid string) []dependent {
	n := g.nodes[uid]
	if n == nil {
		return nil
	}
	out := make([]dependent, 0, len(n.dependents))
	for d := range n.dependents {
		dn := g.nodes[d]
		if dn == nil || !dn.observed {
			continue
		}
		dep := dependent{uid: d, key: dn.key}
		for _, r := range dn.owners {
			if r.UID == uid && r.Block {
				dep.block = true
			}
		}
		out = append(out, dep)
	}
	return out
}

// hasDependents reports whether uid has an observed dependent.
func (g *graph) hasDependents(uid string) bool {
	n := g.nodes[uid]
	if n == nil {
		return false
	}
	for d := range n.dependents {
		if dn := g.nodes[d]; dn != nil && dn.observed {
			return true
		}
	}
	return false
}

// keyOf returns the key of an observed uid.
func (g *graph) keyOf(uid string) (cache.Key, bool) {
	n := g.nodes[uid]
	if n == nil || !n.observed {
		return cache.Key{}, false
	}
	return n.key, true
}

// finalizersOf says which garbage-collection finalizers fs holds.
func finalizersOf(fs []string) (orphan, foreground bool) {
	for _, f := range fs {
		switch f {
		case metav1.FinalizerOrphanDependents:
			orphan = true
		case metav1.FinalizerDeleteDependents:
			foreground = true
		}
	}
	return orphan, foreground
}

var ownerReferencesField = []byte(`"ownerReferences"`)

// mayHaveOwners is the cheap test every watch event passes through: an object whose encoding
// does not mention ownerReferences has none, and is not decoded.
func mayHaveOwners(raw []byte) bool { return bytes.Contains(raw, ownerReferencesField) }

// ownersOf decodes metadata.ownerReferences from an encoded object (nil when it has none or
// they do not decode: the write path validated them).
func ownersOf(raw []byte) []ref {
	var m struct {
		Metadata struct {
			OwnerReferences []metav1.OwnerReference `json:"ownerReferences"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &m); err != nil || len(m.Metadata.OwnerReferences) == 0 {
		return nil
	}
	out := make([]ref, len(m.Metadata.OwnerReferences))
	for i, r := range m.Metadata.OwnerReferences {
		out[i] = ref{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: string(r.UID), Block: r.BlockOwnerDeletion != nil && *r.BlockOwnerDeletion}
	}
	return out
}
