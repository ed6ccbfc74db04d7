package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/reconciler"
)

// Phases of a Controller object.
const (
	PhaseRunning = "Running"
	PhaseWaiting = "Waiting"
	PhaseInvalid = "Invalid"
)

// condition is a condition opemu sets: its status, reason and message.
type condition struct{ status, reason, message string }

// synced is the Synced condition of a hooked object.
func synced(ok bool, reason, message string) condition {
	s := "False"
	if ok {
		s = "True"
	}
	return condition{s, reason, message}
}

// writeStatus keeps every Controller's status (observedGeneration, phase, the Ready
// condition) current while this replica leads: at each change of the Controllers and, while
// there are any, every second, since whether their resources are served changes with CRDs
// (real time: this follows writes, not the clock).
func (m *Manager) writeStatus(ctx context.Context) {
	for {
		m.mu.Lock()
		type item struct {
			obj *cache.Object
			sp  *controllerSpec
		}
		items := make([]item, 0, len(m.objects))
		for name, o := range m.objects {
			if e := m.entries[name]; e != nil && e.uid == o.UID() {
				items = append(items, item{o, e.rec.spec.Load()})
			}
		}
		m.mu.Unlock()
		for _, it := range items {
			if err := m.writeControllerStatus(ctx, it.obj, it.sp); err != nil && ctx.Err() == nil &&
				!errors.Is(err, cache.ErrNotFound) && !reconciler.IsConflict(err) {
				m.log.Warn("writing a Controller's status", "controller", it.obj.Key().Name, "err", err)
			}
		}
		// With no Controller there is nothing to look at again: an idle server does not wake.
		var again <-chan time.Time
		var timer *time.Timer
		if len(items) > 0 {
			timer = time.NewTimer(time.Second)
			again = timer.C
		}
		select {
		case <-ctx.Done():
		case <-m.wake:
		case <-again:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// controllerState is what a Controller's status says about sp.
func (m *Manager) controllerState(sp *controllerSpec) (phase string, c condition) {
	if sp.invalid != nil {
		return PhaseInvalid, condition{"False", "Invalid", sp.invalid.Error()}
	}
	k, ok := m.cfg.Kinds.Lookup(sp.resource.Group, sp.version, sp.resource.Resource)
	if !ok {
		return PhaseWaiting, condition{"False", "ResourceNotServed", fmt.Sprintf("%s %s is not served yet: create its CustomResourceDefinition",
			groupVersion(sp.resource.Group, sp.version), sp.resource.Resource)}
	}
	for _, c := range sp.children {
		if _, err := resolveChild(m.cfg.Kinds, c); err != nil {
			return PhaseWaiting, condition{"False", "ChildKindNotServed", err.Error()}
		}
	}
	return PhaseRunning, condition{"True", "Running", fmt.Sprintf("Reconciling %s (%s) with the hook %s", k.Plural, k.Kind, sp.url)}
}

func groupVersion(group, version string) string {
	if group == "" {
		return version
	}
	return group + "/" + version
}

// writeControllerStatus stores the status of Controller o when it differs from the stored one.
func (m *Manager) writeControllerStatus(ctx context.Context, o *cache.Object, sp *controllerSpec) error {
	doc, err := o.Decode()
	if err != nil {
		return err
	}
	phase, ready := m.controllerState(sp)
	cur := statusMap(doc)
	next := map[string]any{"observedGeneration": o.Generation(), "phase": phase}
	prev, _ := cur["conditions"].([]any)
	next["conditions"] = setCondition(prev, "Ready", ready, o.Generation(), m.cfg.Clock.Now(), nil)
	a, _ := json.Marshal(next)
	b, _ := json.Marshal(cur)
	if bytes.Equal(a, b) {
		return nil
	}
	_, err = m.client.UpdateStatus(ctx, o.Key(), map[string]any{
		"apiVersion": Resource.Group + "/v1", "kind": "Controller",
		"metadata": map[string]any{"name": o.Key().Name, "uid": o.UID()},
		"status":   next,
	})
	return err
}

// setCondition returns conds with the condition typ set to c (replacing any of that type, at
// the end): its lastTransitionTime moves only when its status changes. fields, when set, are
// the fields the kind's schema keeps.
func setCondition(conds []any, typ string, c condition, gen int64, now time.Time, fields map[string]bool) []any {
	out := make([]any, 0, len(conds)+1)
	ltt := now.UTC().Format(time.RFC3339)
	for _, x := range conds {
		m, _ := x.(map[string]any)
		if m != nil && m["type"] == typ {
			if t, ok := m["lastTransitionTime"].(string); ok && m["status"] == c.status {
				ltt = t
			}
			continue
		}
		out = append(out, x)
	}
	cond := map[string]any{"type": typ, "status": c.status, "reason": c.reason, "message": c.message,
		"lastTransitionTime": ltt, "observedGeneration": gen}
	for f := range cond {
		if fields != nil && !fields[f] {
			delete(cond, f)
		}
	}
	return append(out, cond)
}

// withSynced returns status with the object's Synced condition set to c, when kind's schema
// has room for status.conditions (a kind without it gets status unchanged). cur is the stored
// status, whose Synced condition's lastTransitionTime is kept while its status is the same.
func (m *Manager) withSynced(kind *kinds.Kind, status, cur map[string]any, c condition, gen int64, now time.Time) map[string]any {
	fields := m.conditionFieldsOf(kind)
	if fields == nil {
		return status
	}
	out := make(map[string]any, len(status)+1)
	for k, v := range status {
		out[k] = v
	}
	var conds []any
	switch l := out["conditions"].(type) {
	case []any:
		conds = l
	case nil:
	default:
		return out // not a list: the schema says what is wrong with it
	}
	// The stored Synced condition, for its lastTransitionTime.
	if prev, _ := cur["conditions"].([]any); prev != nil {
		for _, x := range prev {
			if p, _ := x.(map[string]any); p != nil && p["type"] == "Synced" {
				conds = append(withoutType(conds, "Synced"), p)
			}
		}
	}
	out["conditions"] = setCondition(conds, "Synced", c, gen, now, fields)
	return out
}

func withoutType(conds []any, typ string) []any {
	out := make([]any, 0, len(conds))
	for _, x := range conds {
		if m, _ := x.(map[string]any); m == nil || m["type"] != typ {
			out = append(out, x)
		}
	}
	return out
}

// conditionFieldsOf returns the condition fields kind's schema keeps under status.conditions,
// or nil when it keeps no conditions (no type and status): found once per kind by pruning a
// probe, so opemu never writes what the schema would refuse.
func (m *Manager) conditionFieldsOf(kind *kinds.Kind) map[string]bool {
	if v, ok := m.conditionFields.Load(kind); ok {
		f, _ := v.(map[string]bool)
		return f
	}
	all := map[string]bool{"type": true, "status": true, "reason": true, "message": true, "lastTransitionTime": true, "observedGeneration": true}
	fields := all
	if kind.Schema != nil {
		probe := map[string]any{"status": map[string]any{"conditions": []any{map[string]any{
			"type": "Synced", "status": "True", "reason": "Probe", "message": "probe",
			"lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": json.Number("1"),
		}}}}
		kind.Schema.Prune(probe)
		fields = nil
		st, _ := probe["status"].(map[string]any)
		if l, _ := st["conditions"].([]any); len(l) == 1 {
			if c, _ := l[0].(map[string]any); c != nil && c["type"] != nil && c["status"] != nil {
				fields = map[string]bool{}
				for k := range c {
					fields[k] = true
				}
			}
		}
	}
	m.conditionFields.Store(kind, fields)
	return fields
}

// watchChildren enqueues an object when one of its children changes (or goes), so a child
// deleted or edited by hand is put back at once rather than at the next resync.
func (m *Manager) watchChildren(ctx context.Context, ctrl *reconciler.Controller, rec *hookReconciler) {
	sp := rec.spec.Load()
	ks, err := rec.childKinds(sp)
	if err != nil || len(ks) == 0 {
		return
	}
	grs := make([]cache.GroupResource, len(ks))
	for i, k := range ks {
		grs[i] = k.GroupResource()
	}
	for ctx.Err() == nil {
		w, err := m.client.Watch(ctx, cache.WatchOptions{Resources: grs})
		if err != nil {
			return
		}
		for ev := range w.Events() {
			if ev.Type == cache.Bookmark || !bytes.Contains(ev.Object.Raw(), []byte(`"ownerReferences"`)) {
				continue
			}
			parent, ok := m.cfg.Kinds.Lookup(sp.resource.Group, sp.version, sp.resource.Resource)
			if !ok {
				continue
			}
			for _, key := range ownersOf(ev.Object, parent) {
				ctrl.Enqueue(key)
			}
		}
		if ctx.Err() != nil || errors.Is(w.Err(), cache.ErrClosed) {
			return
		}
	}
}

// ownersOf returns the keys of obj's controller owners of kind parent.
func ownersOf(obj *cache.Object, parent *kinds.Kind) []cache.Key {
	doc, err := obj.Decode()
	if err != nil {
		return nil
	}
	md, _ := doc["metadata"].(map[string]any)
	refs, _ := md["ownerReferences"].([]any)
	var out []cache.Key
	for _, r := range refs {
		ref, _ := r.(map[string]any)
		if c, _ := ref["controller"].(bool); !c || ref["kind"] != parent.Kind {
			continue
		}
		if g, _ := splitAPIVersion(stringOf(ref["apiVersion"])); g != parent.Group {
			continue
		}
		gr := parent.GroupResource()
		key := cache.Key{Group: gr.Group, Resource: gr.Resource, Name: stringOf(ref["name"])}
		if parent.Namespaced {
			key.Namespace = obj.Key().Namespace
		}
		out = append(out, key)
	}
	return out
}
