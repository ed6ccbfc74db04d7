package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Delete deletes t's object (SPEC §2): an object with finalizers is marked (deletionTimestamp
// set, generation bumped: a MODIFIED event) and goes when an update empties its finalizers;
// deleting a marked object again changes nothing; any other object is removed at once.
// removed says which happened; the object returned is its state after the call. A namespace
// is marked Terminating first (namespace.go).
func (s *Store) Delete(ctx context.Context, t Target, pre cache.Preconditions, o Options) (*cache.Object, bool, error) {
	obj, removed, err := s.delete(ctx, t, pre, o)
	return obj, removed, viewError(t, err)
}

func (s *Store) delete(ctx context.Context, t Target, pre cache.Preconditions, o Options) (*cache.Object, bool, error) {
	t, err := s.storageTarget(t)
	if err != nil {
		return nil, false, err
	}
	if err := s.checkWritable(t, t.Key, o); err != nil {
		return nil, false, err
	}
	if lc := t.Kind.Lifecycle; lc != nil {
		if err := lc.BeforeDelete(ctx, t.Key.Name); err != nil {
			return nil, false, err
		}
	}
	if err := s.admitDelete(ctx, t, pre, o); err != nil {
		return nil, false, err
	}
	var obj *cache.Object
	var removed bool
	if t.Key.GroupResource() == kinds.Namespaces {
		obj, removed, err = s.deleteNamespace(ctx, t, pre, o)
	} else {
		obj, removed, err = s.deleteObject(ctx, t, pre, o)
	}
	if err != nil {
		return nil, false, err
	}
	if lc := t.Kind.Lifecycle; lc != nil && (removed || obj.Deleting()) && !o.DryRun {
		if err := lc.AfterWrite(ctx, obj, removed); err != nil {
			return nil, false, err
		}
	}
	s.recordWrite(ctx, t, o, obj, "Deleted", "Deleted")
	return obj, removed, nil
}

// deleteObject marks or removes t's object in one GuaranteedUpdate, so the finalizers it
// decides on are the ones stored at that moment. A kind that marks its objects itself
// (kinds.DeleteMarker) does so there. The propagation policy first sets the
// garbage collector's finalizer (gcFinalizers): a delete that orphans or waits for dependents
// marks the object even when it had no finalizer, and a second delete of a marked object may
// change its policy (its finalizers) but not its deletionTimestamp, as in kube-apiserver.
func (s *Store) deleteObject(ctx context.Context, t Target, pre cache.Preconditions, o Options) (*cache.Object, bool, error) {
	removing := false
	marker, _ := t.Kind.Lifecycle.(kinds.DeleteMarker)
	obj, err := s.cfg.Storage.GuaranteedUpdate(ctx, t.Key, cache.Preconditions{}, func(cur *cache.Object) (cache.Update, error) {
		removing = false
		if err := deletePreconditions(t, cur, pre); err != nil {
			return cache.Update{}, err
		}
		finalizers, changed := gcFinalizers(cur.Finalizers(), o.PropagationPolicy, t.Kind.DeletePropagation)
		if t.Kind.GracePeriod != nil {
			if u, handled, err := s.deleteGracefully(t.Kind, cur, finalizers, changed, o.GracePeriodSeconds); handled || err != nil {
				removing = u.Remove
				return u, err
			}
		}
		switch {
		case marker != nil && !cur.Deleting():
			obj, err := cur.Decode()
			if err != nil {
				return cache.Update{}, err
			}
			md := metadataOf(obj)
			if changed {
				md["finalizers"] = toAnySlice(finalizers)
			}
			marker.MarkDeleted(obj)
			md["deletionTimestamp"] = s.now()
			return cache.Update{Object: obj}, nil
		case cur.Deleting() && !changed:
			return cache.Update{}, nil
		case len(finalizers) > 0:
			obj, err := cur.Decode()
			if err != nil {
				return cache.Update{}, err
			}
			md := metadataOf(obj)
			if changed {
				md["finalizers"] = toAnySlice(finalizers)
			}
			if !cur.Deleting() {
				s.markDeleted(md, cur, 0)
			}
			return cache.Update{Object: obj}, nil
		}
		removing = true
		if t.Kind.GracePeriod != nil && !cur.Deleting() {
			obj, err := cur.Decode()
			if err != nil {
				return cache.Update{}, err
			}
			s.markDeleted(metadataOf(obj), cur, 0)
			return cache.Update{Object: obj, Remove: true}, nil
		}
		return cache.Update{Remove: true}, nil
	}, storeOptions(t.Kind, o))
	if err != nil {
		return nil, false, err
	}
	if removing && !o.DryRun {
		s.afterRemove(t.Kind, t.Key)
	}
	return obj, removing, nil
}

// markDeleted marks md, the metadata of cur, as being deleted with grace seconds left.
func (s *Store) markDeleted(md map[string]any, cur *cache.Object, grace int64) {
	md["deletionTimestamp"] = s.at(s.cfg.Clock.Now().Add(time.Duration(grace) * time.Second))
	md["deletionGracePeriodSeconds"] = json.Number(strconv.FormatInt(grace, 10))
	md["generation"] = json.Number(strconv.FormatInt(cur.Generation()+1, 10))
}

// deleteGracefully is a DELETE of cur, an object of a kind deleted gracefully (a Pod), as
// kube-apiserver's BeforeDelete has it; handled says it decided, else the ordinary rules
// apply (a removal now). A first DELETE whose grace period (the kind's GracePeriod of the
// requested one) is positive marks the object that far ahead and keeps it; a DELETE of a
// marked object may only shorten its grace period (the deletionTimestamp moves as much
// earlier), and one that shortens it to 0 removes it unless finalizers hold it.
func (s *Store) deleteGracefully(k *kinds.Kind, cur *cache.Object, finalizers []string, changed bool, requested *int64) (u cache.Update, handled bool, err error) {
	obj, err := cur.Decode()
	if err != nil {
		return cache.Update{}, true, err
	}
	md := metadataOf(obj)
	if changed {
		md["finalizers"] = toAnySlice(finalizers)
	}
	if !cur.Deleting() {
		grace := k.GracePeriod(obj, requested)
		if grace == 0 {
			return cache.Update{}, false, nil
		}
		s.markDeleted(md, cur, grace)
		return cache.Update{Object: obj}, true, nil
	}
	old, hasOld := int64(0), false
	if n, ok := md["deletionGracePeriodSeconds"].(json.Number); ok {
		old, err = n.Int64()
		hasOld = err == nil
	}
	if requested == nil || (hasOld && *requested >= old) {
		return cache.Update{}, false, nil // no shorter: the ordinary rules keep or remove it
	}
	if ts, ok := md["deletionTimestamp"].(string); ok {
		if at, err := time.Parse(time.RFC3339, ts); err == nil {
			md["deletionTimestamp"] = s.at(at.Add(time.Duration(*requested-old) * time.Second))
		}
	}
	md["deletionGracePeriodSeconds"] = json.Number(strconv.FormatInt(*requested, 10))
	if *requested == 0 && len(finalizers) == 0 {
		return cache.Update{Object: obj, Remove: true}, true, nil
	}
	return cache.Update{Object: obj}, true, nil
}

// afterRemove finishes what the removal of key, an object of k, leaves: its kind's Limit
// counts it no more. (A Terminating namespace whose last object went is the namespace
// controller's.)
func (s *Store) afterRemove(k *kinds.Kind, key cache.Key) {
	if k.Limit != nil {
		k.Limit.Removed(key)
	}
}

// expire removes the objects of k at keys as their expiry does: at once, whatever their
// finalizers, with no admission, as etcd's lease removes an Event under kube-apiserver. A
// missing object is not an error.
func (s *Store) expire(ctx context.Context, k *kinds.Kind, keys []cache.Key) {
	for _, key := range keys {
		_ = s.expireOne(ctx, k, key)
	}
}

func (s *Store) expireOne(ctx context.Context, k *kinds.Kind, key cache.Key) error {
	_, err := s.cfg.Storage.Delete(ctx, key, cache.Preconditions{}, cache.WriteOptions{})
	if errors.Is(err, cache.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	s.afterRemove(k, key)
	return nil
}

// DeleteCollection deletes every object q selects in t (deletecollection), one Delete each,
// and returns them as the list found them, with its ListMeta (as kube-apiserver does): all of
// them, or with a limit the page it names (a continue token says where the next one starts).
func (s *Store) DeleteCollection(ctx context.Context, t Target, q ListOptions, pre cache.Preconditions, o Options) ([]*cache.Object, metav1.ListMeta, error) {
	items, meta, err := s.List(ctx, t, q)
	if err != nil {
		return nil, meta, err
	}
	for _, it := range items {
		one := t
		one.Key = it.Key()
		if _, _, err := s.Delete(ctx, one, pre, o); err != nil && !errors.Is(err, cache.ErrNotFound) {
			return nil, meta, err
		}
	}
	return items, meta, nil
}

// gcFinalizers returns the finalizers an object has after a delete with policy, as
// kube-apiserver computes them (deletionFinalizersForGarbageCollection): Orphan adds
// metav1.FinalizerOrphanDependents and removes metav1.FinalizerDeleteDependents, Foreground the
// other way round, Background removes both; no policy keeps whichever the object has (the first
// of the two in its list), or when it has neither the kind's default def (a batch/v1 Job's
// Orphan). changed says the set of finalizers differs from cur.
func gcFinalizers(cur []string, policy, def metav1.DeletionPropagation) (out []string, changed bool) {
	orphan, foreground := false, false
	switch policy {
	case metav1.DeletePropagationOrphan:
		orphan = true
	case metav1.DeletePropagationForeground:
		foreground = true
	case "":
		for _, f := range cur {
			if f == metav1.FinalizerOrphanDependents || f == metav1.FinalizerDeleteDependents {
				orphan, foreground = f == metav1.FinalizerOrphanDependents, f == metav1.FinalizerDeleteDependents
				break
			}
		}
		if !orphan && !foreground {
			orphan, foreground = def == metav1.DeletePropagationOrphan, def == metav1.DeletePropagationForeground
		}
	}
	out = make([]string, 0, len(cur)+1)
	for _, f := range cur {
		if f != metav1.FinalizerOrphanDependents && f != metav1.FinalizerDeleteDependents {
			out = append(out, f)
		}
	}
	if orphan {
		out = append(out, metav1.FinalizerOrphanDependents)
	}
	if foreground {
		out = append(out, metav1.FinalizerDeleteDependents)
	}
	return out, !sameSet(cur, out)
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	for _, x := range a {
		if !slices.Contains(b, x) {
			return false
		}
	}
	for _, x := range b {
		if !slices.Contains(a, x) {
			return false
		}
	}
	return true
}

func toAnySlice(l []string) []any {
	out := make([]any, len(l))
	for i, s := range l {
		out[i] = s
	}
	return out
}

// deletePreconditions checks a DELETE's preconditions as kube-apiserver's rest.BeforeDelete
// does, its conflict naming the kind (Widget.conformance.example.com), not the resource.
func deletePreconditions(t Target, cur *cache.Object, pre cache.Preconditions) error {
	var err error
	switch {
	case pre.UID != "" && pre.UID != cur.UID():
		err = fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", pre.UID, cur.UID())
	case pre.ResourceVersion != "" && pre.ResourceVersion != formatRV(cur.ResourceVersion()):
		err = fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%d). The object might have been modified", pre.ResourceVersion, cur.ResourceVersion())
	default:
		return nil
	}
	return apierrors.NewConflict(schema.GroupResource{Group: t.Kind.Group, Resource: t.Kind.Kind}, t.Key.Name, err)
}
