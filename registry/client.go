package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/opemu/opemu/cache"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Client is the in-process client of the API for opemu's own components (the controller, the
// event recorder, the lease lock): reads come from the store, and every write goes through the
// Store's write path (admission, validation, the rules of objects) marked Internal, so what
// they store passes the same checks as a client's write, records no write Events of its own
// and is never refused as read-only.
type Client struct {
	s       *Store
	manager string
}

// Client returns a client whose writes carry manager as their field manager.
func (s *Store) Client(manager string) *Client { return &Client{s: s, manager: manager} }

func (c *Client) options() Options {
	return Options{Internal: true, FieldManager: c.manager, FieldValidation: "Strict"}
}

// Get returns the object at key.
func (c *Client) Get(ctx context.Context, key cache.Key) (*cache.Object, error) {
	return c.s.cfg.Storage.Get(ctx, key)
}

// List lists the objects of gr.
func (c *Client) List(ctx context.Context, gr cache.GroupResource, opts ...cache.ListOption) (cache.ListResult, error) {
	return c.s.cfg.Storage.List(ctx, gr, opts...)
}

// Watch watches the store.
func (c *Client) Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error) {
	return c.s.cfg.Storage.Watch(ctx, opts)
}

// Create creates obj at key (its name, or generateName when key.Name is empty).
func (c *Client) Create(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error) {
	t, err := c.s.TargetOf(key)
	if err != nil {
		return nil, err
	}
	if key.Name != "" {
		metadataOf(obj)["name"] = key.Name
	}
	t.Key.Name = ""
	start := time.Now()
	res, err := c.s.Create(ctx, t, obj, c.options())
	c.record(ctx, "create", key, "", start, res.Object, err)
	return res.Object, err
}

// Expire removes the object at key as its kind's TTL's expiry does: at once, whatever
// finalizers it has and with no admission, the way etcd's lease removes an expired Event under
// kube-apiserver (the recorder's sweep of the in-memory store calls it for the Events EVENT_TTL
// drops). Only objects of a kind with a TTL expire; a missing object is not an error.
func (c *Client) Expire(ctx context.Context, key cache.Key) error {
	t, err := c.s.TargetOf(key)
	if err != nil {
		return err
	}
	if t.Kind.TTL == 0 {
		return fmt.Errorf("registry: %s do not expire", key.GroupResource())
	}
	return c.s.expireOne(ctx, t.Kind, key)
}

// Update replaces the object at key with obj (its status is kept when the kind has a status
// subresource). A resourceVersion in obj is a precondition; without one the update is
// unconditional.
func (c *Client) Update(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error) {
	t, err := c.s.TargetOf(key)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	res, err := c.s.Update(ctx, t, obj, c.options())
	c.record(ctx, "update", key, "", start, res.Object, err)
	return res.Object, err
}

// WithoutFinalizer returns obj decoded without finalizer f, with obj's uid and resourceVersion
// as the preconditions of the Update that writes it (a conflict if obj changed meanwhile); the
// update that removes the last finalizer of an object being deleted removes the object.
func WithoutFinalizer(obj *cache.Object, f string) (map[string]any, error) {
	m, err := obj.Decode()
	if err != nil {
		return nil, err
	}
	md, _ := m["metadata"].(map[string]any)
	var kept []any
	for _, x := range obj.Finalizers() {
		if x != f {
			kept = append(kept, x)
		}
	}
	if len(kept) == 0 {
		delete(md, "finalizers")
	} else {
		md["finalizers"] = kept
	}
	md["resourceVersion"] = strconv.FormatUint(obj.ResourceVersion(), 10)
	md["uid"] = obj.UID()
	return m, nil
}

// UpdateStatus writes obj's status, through the status subresource when the kind has one.
func (c *Client) UpdateStatus(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error) {
	t, err := c.s.TargetOf(key)
	if err != nil {
		return nil, err
	}
	if t.Kind.Status {
		t.Sub = "status"
	}
	start := time.Now()
	res, err := c.s.Update(ctx, t, obj, c.options())
	c.record(ctx, "update", key, t.Sub, start, res.Object, err)
	return res.Object, err
}

// Finalize writes obj's spec.finalizers (and metadata) through the finalize subresource of a
// kind that has one (a Namespace): the namespace controller's last step.
func (c *Client) Finalize(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error) {
	t, err := c.s.TargetOf(key)
	if err != nil {
		return nil, err
	}
	if !t.Kind.Finalize {
		return nil, fmt.Errorf("registry: %s has no finalize subresource", key.GroupResource())
	}
	t.Sub = "finalize"
	start := time.Now()
	res, err := c.s.Update(ctx, t, obj, c.options())
	c.record(ctx, "update", key, t.Sub, start, res.Object, err)
	return res.Object, err
}

// Counts returns the store's object counts per resource and namespace (which resources hold
// objects in a namespace).
func (c *Client) Counts() []cache.ResourceCount { return c.s.cfg.Storage.Counts() }

// Apply is a server-side apply of obj (with apiVersion, kind and metadata.name; the kind of
// its apiVersion, any served version) at key, as the client's field manager, taking over any
// field another manager owns: it creates the object when it is missing and otherwise sets
// what obj sets and removes what this manager applied before and no longer does.
func (c *Client) Apply(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error) {
	av, kind := stringOf(obj["apiVersion"]), stringOf(obj["kind"])
	k, ok := c.s.cfg.Kinds.ForKind(av, kind)
	if !ok {
		return nil, badRequest("%s %s is not served", av, kind)
	}
	body, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	o := c.options()
	o.Force = true
	start := time.Now()
	res, err := c.s.Patch(ctx, Target{Kind: k, Key: key}, applyPatchType, body, o)
	c.record(ctx, "patch", key, "", start, res.Object, err)
	return res.Object, err
}

// Delete deletes the object at key (see Store.Delete); removed says it is gone.
func (c *Client) Delete(ctx context.Context, key cache.Key, pre cache.Preconditions) (*cache.Object, bool, error) {
	t, err := c.s.TargetOf(key)
	if err != nil {
		return nil, false, err
	}
	return c.delete(ctx, t, pre, c.options())
}

// delete deletes and records the call.
func (c *Client) delete(ctx context.Context, t Target, pre cache.Preconditions, o Options) (*cache.Object, bool, error) {
	start := time.Now()
	obj, removed, err := c.s.Delete(ctx, t, pre, o)
	c.record(ctx, "delete", t.Key, "", start, obj, err)
	return obj, removed, err
}

// DeletePropagating deletes the object at key as Delete does, with a propagation policy
// (Options.PropagationPolicy): how the garbage collector deletes a dependent in the
// foreground, or keeps the policy a dependent's own finalizer asks for.
func (c *Client) DeletePropagating(ctx context.Context, key cache.Key, pre cache.Preconditions, policy metav1.DeletionPropagation) (*cache.Object, bool, error) {
	t, err := c.s.TargetOf(key)
	if err != nil {
		return nil, false, err
	}
	o := c.options()
	o.PropagationPolicy = policy
	return c.delete(ctx, t, pre, o)
}

// Bootstrap makes what exists from the start: the system namespaces (SystemNamespaces), and
// objs (the built-in CRDs; typed objects or decoded JSON, each with apiVersion, kind and a
// name), each unless it exists.
func (s *Store) Bootstrap(ctx context.Context, objs ...any) error {
	c := s.Client("opemu")
	all := make([]any, 0, len(SystemNamespaces)+len(objs))
	for _, name := range SystemNamespaces {
		all = append(all, map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}})
	}
	for _, v := range append(all, objs...) {
		raw, err := json.Marshal(v)
		if err != nil {
			return err
		}
		obj, err := DecodeObject(raw)
		if err != nil {
			return err
		}
		av, kind := stringOf(obj["apiVersion"]), stringOf(obj["kind"])
		k, ok := s.cfg.Kinds.ForKind(av, kind)
		if !ok {
			return fmt.Errorf("registry: bootstrap: %s %s is not served", av, kind)
		}
		md := metadataOf(obj)
		key := cache.Key{Group: k.Group, Resource: k.Plural, Namespace: stringOf(md["namespace"]), Name: stringOf(md["name"])}
		// What exists is not written again: an existing object is never an error, also when
		// the store refuses every write (a full etcd).
		if _, err := c.Get(ctx, key); err == nil {
			continue
		}
		if _, err := c.Create(ctx, key, obj); err != nil && !errors.Is(err, cache.ErrAlreadyExists) {
			return err
		}
	}
	return nil
}

// DeleteWithGrace deletes the object at key as Delete does, with a grace period in seconds
// (Options.GracePeriodSeconds) for a kind deleted gracefully: a kubelet's last delete of a Pod
// it stopped is one of 0.
func (c *Client) DeleteWithGrace(ctx context.Context, key cache.Key, pre cache.Preconditions, grace int64) (*cache.Object, bool, error) {
	t, err := c.s.TargetOf(key)
	if err != nil {
		return nil, false, err
	}
	o := c.options()
	o.GracePeriodSeconds = &grace
	return c.delete(ctx, t, pre, o)
}

// Patch patches the object at key, or its subresource sub ("status"), with body of patchType
// (application/json-patch+json, merge-patch+json or strategic-merge-patch+json), as a PATCH
// request does.
func (c *Client) Patch(ctx context.Context, key cache.Key, sub, patchType string, body []byte) (*cache.Object, error) {
	t, err := c.s.TargetOf(key)
	if err != nil {
		return nil, err
	}
	t.Sub = sub
	res, err := c.s.Patch(ctx, t, patchType, body, c.options())
	return res.Object, err
}
