package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/opemu/opemu/cache"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// pdbResource holds PodDisruptionBudgets.
var pdbResource = cache.GroupResource{Group: "policy", Resource: "poddisruptionbudgets"}

// evictionRetries bounds how often an eviction tries again after a conflict, as kube's
// EvictionsRetry.
const evictionRetries = 5

// Evict evicts the Pod at key (pods/eviction), as kube-apiserver's eviction storage does: a
// Pod that is not running (Pending, finished) or already being deleted is deleted at once; one
// that a PodDisruptionBudget covers is deleted only when the budget allows a disruption, which
// it takes (disruptionsAllowed less one, the Pod in disruptedPods), else a 429 in kube's words;
// a Pod two budgets cover is a 500. The Pod gets the DisruptionTarget condition, then is
// deleted gracefully with o (its grace period, dry run). pre are the DeleteOptions'
// preconditions.
func (s *Store) Evict(ctx context.Context, key cache.Key, pre cache.Preconditions, o Options) error {
	t, err := s.TargetOf(key)
	if err != nil {
		return err
	}
	for range evictionRetries {
		err = s.evict(ctx, t, pre, o)
		if !apierrors.IsConflict(err) || pre.ResourceVersion != "" {
			return err
		}
	}
	return err
}

func (s *Store) evict(ctx context.Context, t Target, pre cache.Preconditions, o Options) error {
	obj, err := s.cfg.Storage.Get(ctx, t.Key)
	if err != nil {
		return err
	}
	var pod corev1.Pod
	if err := json.Unmarshal(obj.Raw(), &pod); err != nil {
		return err
	}
	phase := pod.Status.Phase
	if phase == corev1.PodSucceeded || phase == corev1.PodFailed || phase == corev1.PodPending || pod.DeletionTimestamp != nil {
		if pre.ResourceVersion == "" && phase != corev1.PodSucceeded && phase != corev1.PodFailed && pod.DeletionTimestamp == nil {
			pre.ResourceVersion = strconv.FormatUint(obj.ResourceVersion(), 10)
		}
		return s.disruptAndDelete(ctx, t, obj, pre, o)
	}
	pdbs, err := s.budgetsOf(ctx, &pod)
	if err != nil {
		return err
	}
	switch {
	case len(pdbs) > 1:
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError,
			Message: "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."}}
	case len(pdbs) == 1:
		pdb := pdbs[0]
		ready := false
		for _, c := range pod.Status.Conditions {
			ready = ready || (c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue)
		}
		unhealthyGoes := !ready && ((pdb.Spec.UnhealthyPodEvictionPolicy != nil && *pdb.Spec.UnhealthyPodEvictionPolicy == policyv1.AlwaysAllow) ||
			(pdb.Status.CurrentHealthy >= pdb.Status.DesiredHealthy && pdb.Status.DesiredHealthy > 0))
		if unhealthyGoes {
			if pre.ResourceVersion == "" {
				pre.ResourceVersion = strconv.FormatUint(obj.ResourceVersion(), 10)
			}
			err := s.disruptAndDelete(ctx, t, obj, pre, o)
			if apierrors.IsConflict(err) {
				return processing(pdb.Name)
			}
			return err
		}
		if err := s.takeDisruption(ctx, pdb, pod.Name, o.DryRun); err != nil {
			return err
		}
	}
	return s.disruptAndDelete(ctx, t, obj, pre, o)
}

// budgetsOf lists the PodDisruptionBudgets of pod's namespace whose selector takes it.
func (s *Store) budgetsOf(ctx context.Context, pod *corev1.Pod) ([]*policyv1.PodDisruptionBudget, error) {
	l, err := s.cfg.Storage.List(ctx, pdbResource, cache.InNamespace(pod.Namespace))
	if err != nil {
		return nil, err
	}
	var out []*policyv1.PodDisruptionBudget
	for _, o := range l.Items {
		var pdb policyv1.PodDisruptionBudget
		if json.Unmarshal(o.Raw(), &pdb) != nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		out = append(out, &pdb)
	}
	return out, nil
}

// takeDisruption is kube's checkAndDecrement: the budget must be up to date and allow a
// disruption, which it then counts (written unless dryRun).
func (s *Store) takeDisruption(ctx context.Context, pdb *policyv1.PodDisruptionBudget, pod string, dryRun bool) error {
	cause := func(msg string) []metav1.StatusCause {
		return []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause, Message: msg}}
	}
	switch {
	case pdb.Status.ObservedGeneration < pdb.Generation:
		return processing(pdb.Name)
	case pdb.Status.DisruptionsAllowed < 0:
		err := apierrors.NewForbidden(schema.GroupResource{Group: "policy", Resource: "poddisruptionbudget"}, pdb.Name, errors.New("pdb disruptions allowed is negative"))
		err.ErrStatus.Details.Causes = cause(fmt.Sprintf("The disruption budget %s does not allow evicting pods currently: pdb disruptions allowed is negative", pdb.Name))
		return err
	case pdb.Status.DisruptionsAllowed == 0:
		err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 0)
		msg := fmt.Sprintf("The disruption budget %s does not allow evicting pods currently", pdb.Name)
		if pdb.Status.CurrentHealthy <= pdb.Status.DesiredHealthy {
			msg = fmt.Sprintf("The disruption budget %s needs %d healthy pods and has %d currently", pdb.Name, pdb.Status.DesiredHealthy, pdb.Status.CurrentHealthy)
		}
		err.ErrStatus.Details.Causes = cause(msg)
		return err
	}
	if dryRun {
		return nil
	}
	pdb.Status.DisruptionsAllowed--
	if pdb.Status.DisruptionsAllowed == 0 {
		setDisruptionAllowed(pdb, s.cfg.Clock.Now())
	}
	if pdb.Status.DisruptedPods == nil {
		pdb.Status.DisruptedPods = map[string]metav1.Time{}
	}
	pdb.Status.DisruptedPods[pod] = metav1.NewTime(s.cfg.Clock.Now())
	body, err := typedToMap(pdb)
	if err != nil {
		return err
	}
	t, err := s.TargetOf(cache.Key{Group: pdbResource.Group, Resource: pdbResource.Resource, Namespace: pdb.Namespace, Name: pdb.Name})
	if err != nil {
		return err
	}
	t.Sub = "status"
	_, err = s.Update(ctx, t, body, Options{Internal: true})
	return err
}

// setDisruptionAllowed is kube's UpdateDisruptionAllowedCondition for a budget that allows no
// more disruptions: DisruptionAllowed False, InsufficientPods.
func setDisruptionAllowed(pdb *policyv1.PodDisruptionBudget, now time.Time) {
	for i, c := range pdb.Status.Conditions {
		if c.Type == policyv1.DisruptionAllowedCondition {
			if c.Status != metav1.ConditionFalse {
				pdb.Status.Conditions[i].LastTransitionTime = metav1.NewTime(now)
			}
			pdb.Status.Conditions[i].Status, pdb.Status.Conditions[i].Reason = metav1.ConditionFalse, policyv1.InsufficientPodsReason
			pdb.Status.Conditions[i].ObservedGeneration = pdb.Status.ObservedGeneration
			return
		}
	}
	pdb.Status.Conditions = append(pdb.Status.Conditions, metav1.Condition{Type: policyv1.DisruptionAllowedCondition, Status: metav1.ConditionFalse,
		Reason: policyv1.InsufficientPodsReason, ObservedGeneration: pdb.Status.ObservedGeneration, LastTransitionTime: metav1.NewTime(now)})
}

// processing is the 429 of a budget the disruption controller has not caught up with.
func processing(name string) error {
	err := apierrors.NewTooManyRequests("Cannot evict pod as it would violate the pod's disruption budget.", 10)
	err.ErrStatus.Details.Causes = []metav1.StatusCause{{Type: policyv1.DisruptionBudgetCause,
		Message: fmt.Sprintf("The disruption budget %s is still being processed by the server.", name)}}
	return err
}

// disruptAndDelete gives the Pod the DisruptionTarget condition (EvictionByEvictionAPI), then
// deletes it (gracefully) with the preconditions, as kube's addConditionAndDeletePod.
func (s *Store) disruptAndDelete(ctx context.Context, t Target, obj *cache.Object, pre cache.Preconditions, o Options) error {
	if !o.DryRun {
		if pre.UID != "" && pre.UID != obj.UID() {
			return apierrors.NewConflict(schema.GroupResource{Resource: "Pod"}, t.Key.Name,
				fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", pre.UID, obj.UID()))
		}
		rv := strconv.FormatUint(obj.ResourceVersion(), 10)
		if pre.ResourceVersion != "" && pre.ResourceVersion != rv {
			return apierrors.NewConflict(schema.GroupResource{Resource: "Pod"}, t.Key.Name,
				fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", pre.ResourceVersion, rv))
		}
		var pod corev1.Pod
		if err := json.Unmarshal(obj.Raw(), &pod); err != nil {
			return err
		}
		want := corev1.PodCondition{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, Reason: "EvictionByEvictionAPI", Message: "Eviction API: evicting",
			LastTransitionTime: metav1.NewTime(s.cfg.Clock.Now())}
		found := false
		for i, c := range pod.Status.Conditions {
			if c.Type == want.Type {
				if c.Status == want.Status {
					want.LastTransitionTime = c.LastTransitionTime
				}
				pod.Status.Conditions[i], found = want, true
			}
		}
		if !found {
			pod.Status.Conditions = append(pod.Status.Conditions, want)
		}
		body, err := typedToMap(&pod)
		if err != nil {
			return err
		}
		st := t
		st.Sub = "status"
		res, err := s.Update(ctx, st, body, Options{Internal: true})
		if err != nil {
			return err
		}
		if pre.ResourceVersion != "" {
			pre.ResourceVersion = strconv.FormatUint(res.Object.ResourceVersion(), 10)
		}
	}
	_, _, err := s.Delete(ctx, t, pre, o)
	return err
}

// typedToMap turns a typed object into the decoded JSON the write path takes.
func typedToMap(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return cache.DecodeJSON(raw)
}
