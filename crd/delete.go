package crd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"k8s.io/apiextensions-apiserver/pkg/apihelpers"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

// A CRD is deleted as kube-apiserver deletes one: the DELETE marks it (deletionTimestamp, the
// customresourcecleanup finalizer, the Terminating condition) and answers it; its custom
// resources are then deleted through the write path (their finalizers honoured), new ones
// are refused, and once none is left the finalizer goes and the CRD with it (its kinds stop
// being served, watches end). kube-apiserver's finalizer controller does the middle part on
// its own; here it runs in the DELETE that marks the CRD, and in the delete of the last
// custom resource a finalizer held back.

// Client is what a deleted CRD's clean-up reads and writes through: the write path's client
// (registry.Client), so custom resources are deleted as a client's DELETE deletes them.
type Client interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error)
	Update(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	UpdateStatus(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
	Delete(ctx context.Context, key cache.Key, pre cache.Preconditions) (*cache.Object, bool, error)
}

// UseClient sets the client deleted CRDs are cleaned up through. Call it once, before the
// server serves: without it a deleted CRD stays Terminating.
func (r *Registry) UseClient(c Client) { r.client = c }

// MarkDeleted adds the customresourcecleanup finalizer and the Terminating condition to obj,
// a stored CRD being deleted (kinds.DeleteMarker).
func (l lifecycle) MarkDeleted(obj map[string]any) {
	c, err := decodeCRD(obj)
	if err != nil {
		return // not stored by this write path; the delete removes it as it is
	}
	if !apihelpers.CRDHasFinalizer(c, apiextv1.CustomResourceCleanupFinalizer) {
		c.Finalizers = append(c.Finalizers, apiextv1.CustomResourceCleanupFinalizer)
	}
	apihelpers.SetCRDCondition(c, apiextv1.CustomResourceDefinitionCondition{
		Type: apiextv1.Terminating, Status: apiextv1.ConditionTrue, Reason: "InstanceDeletionPending",
		Message: "CustomResourceDefinition marked for deletion; CustomResource deletion will begin soon",
	})
	_ = replaceBody(obj, c)
	obj["metadata"].(map[string]any)["finalizers"] = toAny(c.Finalizers)
}

var _ kinds.DeleteMarker = lifecycle{}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// cleanUp deletes every custom resource of c, a CRD being deleted, and finishes it when none is
// left. It does nothing while another call cleans c up (its own status write comes back here).
func (r *Registry) cleanUp(ctx context.Context, c *apiextv1.CustomResourceDefinition) error {
	if r.client == nil || !apihelpers.CRDHasFinalizer(c, apiextv1.CustomResourceCleanupFinalizer) {
		return nil
	}
	r.mu.Lock()
	if r.cleaning[c.Name] {
		r.mu.Unlock()
		return nil
	}
	r.cleaning[c.Name] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.cleaning, c.Name)
		r.mu.Unlock()
	}()
	if cond := apihelpers.FindCRDCondition(c, apiextv1.Terminating); cond == nil || cond.Reason != "InstanceDeletionInProgress" {
		next := c.DeepCopy()
		apihelpers.SetCRDCondition(next, apiextv1.CustomResourceDefinitionCondition{
			Type: apiextv1.Terminating, Status: apiextv1.ConditionTrue, Reason: "InstanceDeletionInProgress",
			Message: "CustomResource deletion is in progress",
		})
		if err := r.write(ctx, next, r.client.UpdateStatus); err != nil {
			return ignoreGone(err)
		}
	}
	gr := cache.GroupResource{Group: c.Spec.Group, Resource: c.Spec.Names.Plural}
	res, err := r.client.List(ctx, gr)
	if err != nil {
		return err
	}
	for _, o := range res.Items {
		if o.Deleting() {
			continue
		}
		if _, _, err := r.client.Delete(ctx, o.Key(), cache.Preconditions{}); ignoreGone(err) != nil {
			return err
		}
	}
	return r.finish(ctx, c.Name)
}

// finish removes the customresourcecleanup finalizer of the CRD name, being deleted, when none
// of its custom resources is left, and so the CRD.
func (r *Registry) finish(ctx context.Context, name string) error {
	if r.client == nil {
		return nil
	}
	o, err := r.client.Get(ctx, cache.Key{Group: Resource.Group, Resource: Resource.Resource, Name: name})
	if err != nil {
		return ignoreGone(err)
	}
	var c apiextv1.CustomResourceDefinition
	if err := json.Unmarshal(o.Raw(), &c); err != nil {
		return err
	}
	if c.DeletionTimestamp == nil || !apihelpers.CRDHasFinalizer(&c, apiextv1.CustomResourceCleanupFinalizer) {
		return nil
	}
	res, err := r.client.List(ctx, cache.GroupResource{Group: c.Spec.Group, Resource: c.Spec.Names.Plural})
	if err != nil || len(res.Items) > 0 {
		return err
	}
	apihelpers.CRDRemoveFinalizer(&c, apiextv1.CustomResourceCleanupFinalizer)
	return ignoreGone(r.write(ctx, &c, r.client.Update))
}

// write writes c (its resourceVersion the precondition) with update.
func (r *Registry) write(ctx context.Context, c *apiextv1.CustomResourceDefinition, update func(context.Context, cache.Key, map[string]any) (*cache.Object, error)) error {
	raw, err := json.Marshal(c)
	if err != nil {
		return err
	}
	obj, err := cache.DecodeJSON(raw)
	if err != nil {
		return err
	}
	_, err = update(ctx, cache.Key{Group: Resource.Group, Resource: Resource.Resource, Name: c.Name}, obj)
	return err
}

// ignoreGone drops the errors of an object gone or changed meanwhile: whoever changed it
// finishes the clean-up.
func ignoreGone(err error) error {
	if errors.Is(err, cache.ErrNotFound) || errors.Is(err, cache.ErrConflict) || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}

// objects is the Lifecycle of a CRD's custom resources: while the CRD is being deleted, new
// ones are refused (as kube-apiserver refuses them), and the removal of the last one finishes
// the CRD.
type objects struct {
	r           *Registry
	crd         string
	gr          k8sschema.GroupResource
	terminating bool // the CRD served was being deleted
}

func (l objects) BeforeWrite(_ context.Context, obj, old map[string]any, _ bool) ([]string, error) {
	if l.terminating && old == nil {
		md, _ := obj["metadata"].(map[string]any)
		name, _ := md["name"].(string)
		return nil, apierrors.NewForbidden(l.gr, name, fmt.Errorf("create not allowed while custom resource definition is terminating"))
	}
	return nil, nil
}

func (objects) BeforeDelete(context.Context, string) error { return nil }

func (l objects) AfterWrite(ctx context.Context, _ *cache.Object, removed bool) error {
	if l.terminating && removed {
		return l.r.finish(ctx, l.crd)
	}
	return nil
}
