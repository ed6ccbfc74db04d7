package namespaces

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/reconciler"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
)

// pods are deleted first: while any is left, nothing else in the namespace is (as kube's
// namespace controller waits for Pods to terminate before deleting what they use).
var pods = cache.GroupResource{Resource: "pods"}

// Sync is one pass of the namespace controller over namespace name, kube's
// NamespacedResourcesDeleter.Delete: nothing unless it is being deleted; else its phase is made
// Terminating, every object in it is deleted (Background), its conditions say what is left,
// and when nothing is, the kubernetes finalizer leaves spec.finalizers through /finalize. done
// reports that the namespace needs nothing more from this controller (gone, not being deleted,
// or finalized); false means content is left.
func (c *Controller) Sync(ctx context.Context, name string) (done bool, err error) {
	key := cache.Key{Group: kinds.Namespaces.Group, Resource: kinds.Namespaces.Resource, Name: name}
	obj, err := c.cfg.Client.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	if !obj.Deleting() {
		return true, nil
	}
	var ns corev1.Namespace
	if err := json.Unmarshal(obj.Raw(), &ns); err != nil {
		return false, err
	}
	if ns.Status.Phase != corev1.NamespaceTerminating {
		ns.Status.Phase = corev1.NamespaceTerminating
		if err := c.write(ctx, key, &ns, c.cfg.Client.UpdateStatus); err != nil {
			return false, err
		}
	}
	if len(ns.Spec.Finalizers) == 0 {
		return true, nil // finalized: what metadata.finalizers hold is their owners'
	}
	left, err := c.deleteContent(ctx, name)
	var conds conditions
	conds.content(left, err)
	if conds.update(&ns.Status, metav1.NewTime(c.clock().Now().UTC().Truncate(time.Second))) {
		if werr := c.write(ctx, key, &ns, c.cfg.Client.UpdateStatus); werr != nil && err == nil {
			err = werr
		}
	}
	if err != nil || left.count() > 0 {
		return false, err
	}
	kept := make([]corev1.FinalizerName, 0, len(ns.Spec.Finalizers))
	for _, f := range ns.Spec.Finalizers {
		if f != corev1.FinalizerKubernetes && !slices.Contains(kept, f) {
			kept = append(kept, f)
		}
	}
	slices.Sort(kept)
	ns.Spec.Finalizers = kept
	err = c.write(ctx, key, &ns, c.cfg.Client.Finalize)
	if errors.Is(err, cache.ErrNotFound) {
		return true, nil
	}
	return err == nil, err
}

func (c *Controller) clock() clock.PassiveClock {
	if c.cfg.Tuning.Clock == nil {
		return clock.RealClock{}
	}
	return c.cfg.Tuning.Clock
}

// write writes ns at key with one of the client's updates (its resourceVersion a
// precondition: a conflict requeues) and keeps the stored result in ns.
func (c *Controller) write(ctx context.Context, key cache.Key, ns *corev1.Namespace,
	update func(context.Context, cache.Key, map[string]any) (*cache.Object, error)) error {
	raw, err := json.Marshal(ns)
	if err != nil {
		return err
	}
	obj, err := cache.DecodeJSON(raw)
	if err != nil {
		return err
	}
	obj["apiVersion"], obj["kind"] = "v1", "Namespace"
	stored, err := update(ctx, key, obj)
	if err != nil {
		return err
	}
	*ns = corev1.Namespace{}
	return json.Unmarshal(stored.Raw(), ns)
}

// remaining is what a pass left in a namespace: objects per resource, and objects per
// finalizer they still carry.
type remaining struct {
	objects    map[cache.GroupResource]int
	finalizers map[string]int
}

func (r remaining) count() int {
	n := 0
	for _, v := range r.objects {
		n += v
	}
	return n
}

// deleteContent deletes every object in namespace ns, Pods first (while a Pod is left, nothing
// else is deleted), and says what is left. A failure to delete is reported with what is left.
func (c *Controller) deleteContent(ctx context.Context, ns string) (remaining, error) {
	left := remaining{objects: map[cache.GroupResource]int{}, finalizers: map[string]int{}}
	var grs []cache.GroupResource
	for _, rc := range c.cfg.Client.Counts() {
		if rc.Namespace == ns && rc.Count > 0 && !slices.Contains(grs, rc.GroupResource) {
			grs = append(grs, rc.GroupResource)
		}
	}
	sort.Slice(grs, func(i, j int) bool {
		if (grs[i] == pods) != (grs[j] == pods) {
			return grs[i] == pods
		}
		return grs[i].String() < grs[j].String()
	})
	var errs []error
	for _, gr := range grs {
		if gr != pods && left.objects[pods] > 0 {
			break
		}
		if err := c.deleteAll(ctx, gr, ns, left); err != nil {
			errs = append(errs, err)
		}
	}
	return left, errors.Join(errs...)
}

// deleteAll deletes every object of gr in namespace ns (Background: the garbage collector
// takes their dependents) and counts those left.
func (c *Controller) deleteAll(ctx context.Context, gr cache.GroupResource, ns string, left remaining) error {
	list, err := c.cfg.Client.List(ctx, gr, cache.InNamespace(ns))
	if err != nil {
		return err
	}
	var errs []error
	for _, obj := range list.Items {
		now, removed, err := c.cfg.Client.DeletePropagating(ctx, obj.Key(), cache.Preconditions{UID: obj.UID()}, metav1.DeletePropagationBackground)
		switch {
		case errors.Is(err, cache.ErrNotFound), err == nil && removed:
			continue
		case err != nil:
			if !reconciler.IsConflict(err) {
				errs = append(errs, fmt.Errorf("failed to delete %s %s/%s: %w", gr, ns, obj.Key().Name, err))
			}
			now = obj
		}
		left.objects[gr]++
		for _, f := range now.Finalizers() {
			left.finalizers[f]++
		}
	}
	return errors.Join(errs...)
}

// conditions computes a Terminating namespace's conditions as kube's namespace controller
// does (k8s.io/kubernetes/pkg/controller/namespace/deletion): five types, each False with its
// "all is well" reason unless a pass found otherwise.
type conditions struct{ found []corev1.NamespaceCondition }

var conditionTypes = []corev1.NamespaceConditionType{
	corev1.NamespaceDeletionDiscoveryFailure,
	corev1.NamespaceDeletionGVParsingFailure,
	corev1.NamespaceDeletionContentFailure,
	corev1.NamespaceContentRemaining,
	corev1.NamespaceFinalizersRemaining,
}

var okConditions = map[corev1.NamespaceConditionType][2]string{
	corev1.NamespaceDeletionDiscoveryFailure: {"ResourcesDiscovered", "All resources successfully discovered"},
	corev1.NamespaceDeletionGVParsingFailure: {"ParsedGroupVersions", "All legacy kube types successfully parsed"},
	corev1.NamespaceDeletionContentFailure:   {"ContentDeleted", "All content successfully deleted, may be waiting on finalization"},
	corev1.NamespaceContentRemaining:         {"ContentRemoved", "All content successfully removed"},
	corev1.NamespaceFinalizersRemaining:      {"ContentHasNoFinalizers", "All content-preserving finalizers finished"},
}

// content records what a pass left and why it could not delete everything.
func (c *conditions) content(left remaining, err error) {
	var objects, finalizers []string
	for gr, n := range left.objects {
		objects = append(objects, fmt.Sprintf("%s.%s has %d resource instances", gr.Resource, gr.Group, n))
	}
	for f, n := range left.finalizers {
		finalizers = append(finalizers, fmt.Sprintf("%s in %d resource instances", f, n))
	}
	sort.Strings(objects)
	sort.Strings(finalizers)
	if len(objects) > 0 {
		c.found = append(c.found, corev1.NamespaceCondition{Type: corev1.NamespaceContentRemaining, Status: corev1.ConditionTrue,
			Reason: "SomeResourcesRemain", Message: "Some resources are remaining: " + strings.Join(objects, ", ")})
	}
	if len(finalizers) > 0 {
		c.found = append(c.found, corev1.NamespaceCondition{Type: corev1.NamespaceFinalizersRemaining, Status: corev1.ConditionTrue,
			Reason: "SomeFinalizersRemain", Message: "Some content in the namespace has finalizers remaining: " + strings.Join(finalizers, ", ")})
	}
	if err != nil {
		msgs := sets.New[string]()
		for _, e := range unjoin(err) {
			msgs.Insert(e.Error())
		}
		c.found = append(c.found, corev1.NamespaceCondition{Type: corev1.NamespaceDeletionContentFailure, Status: corev1.ConditionTrue,
			Reason:  "ContentDeletionFailed",
			Message: fmt.Sprintf("Failed to delete all resource types, %d remaining: %v", msgs.Len(), strings.Join(sets.List(msgs), ", "))})
	}
}

// update sets the five conditions in st (a transition's time is now) and reports a change.
func (c *conditions) update(st *corev1.NamespaceStatus, now metav1.Time) bool {
	changed := false
	for _, typ := range conditionTypes {
		want := corev1.NamespaceCondition{Type: typ, Status: corev1.ConditionFalse, Reason: okConditions[typ][0], Message: okConditions[typ][1]}
		for _, f := range c.found {
			if f.Type == typ {
				want = f
			}
		}
		i := slices.IndexFunc(st.Conditions, func(have corev1.NamespaceCondition) bool { return have.Type == typ })
		if i < 0 {
			want.LastTransitionTime = now
			st.Conditions = append(st.Conditions, want)
			changed = true
			continue
		}
		have := &st.Conditions[i]
		if have.Status != want.Status || have.Reason != want.Reason || have.Message != want.Message {
			if have.Status != want.Status {
				have.LastTransitionTime = now
			}
			have.Status, have.Reason, have.Message = want.Status, want.Reason, want.Message
			changed = true
		}
	}
	return changed
}

// unjoin lists the errors errors.Join made err of (err itself otherwise).
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, unjoin(e)...)
		}
		return out
	}
	return []error{err}
}
