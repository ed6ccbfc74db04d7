package hooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
)

// Children: the objects a hook manages for an object, of the kinds its Controller lists, each
// with a controller ownerReference to the object (so the garbage collector removes them with
// it). opemu finds them by that reference, sends them to the hook, and makes them match the
// hook's answer with server-side apply (the Controller's name is the field manager) and
// deletes.

// childRef is one entry of spec.children.
type childRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Resource   string `json:"resource"`
}

// child is an existing child of an object.
type child struct {
	kind *kinds.Kind
	key  cache.Key
	uid  string
	obj  map[string]any // in kind's version
}

type childSet []child

// byKind is the children as a hook is sent them: by "Kind.apiVersion", then by name
// ("namespace/name" for namespaced children of a cluster-scoped object). Every listed kind has
// an entry.
func (s childSet) byKind(ks []*kinds.Kind, parentNamespaced bool) map[string]map[string]any {
	out := make(map[string]map[string]any, len(ks))
	for _, k := range ks {
		out[childKey(k)] = map[string]any{}
	}
	for _, c := range s {
		name := c.key.Name
		if !parentNamespaced && c.key.Namespace != "" {
			name = c.key.Namespace + "/" + name
		}
		out[childKey(c.kind)][name] = c.obj
	}
	return out
}

func childKey(k *kinds.Kind) string { return k.Kind + "." + k.GroupVersion() }

// childKinds resolves spec.children into served kinds.
func (r *hookReconciler) childKinds(sp *controllerSpec) ([]*kinds.Kind, error) {
	out := make([]*kinds.Kind, 0, len(sp.children))
	seen := map[cache.GroupResource]bool{}
	for _, c := range sp.children {
		k, err := resolveChild(r.m.cfg.Kinds, c)
		if err != nil {
			return nil, err
		}
		if seen[k.GroupResource()] {
			continue
		}
		seen[k.GroupResource()] = true
		out = append(out, k)
	}
	return out, nil
}

// resolveChild finds the served kind of a spec.children entry.
func resolveChild(served *kinds.Registry, c childRef) (*kinds.Kind, error) {
	var k *kinds.Kind
	var ok bool
	what := c.APIVersion + " " + c.Kind
	switch {
	case c.Kind != "":
		k, ok = served.ForKind(c.APIVersion, c.Kind)
	case c.Resource != "":
		group, version := splitAPIVersion(c.APIVersion)
		k, ok = served.Lookup(group, version, c.Resource)
		what = c.APIVersion + " " + c.Resource
	default:
		return nil, fmt.Errorf("spec.children entry %s names neither a kind nor a resource", c.APIVersion)
	}
	switch {
	case !ok:
		return nil, fmt.Errorf("the child kind %s is not served", what)
	case k.Conversion != nil:
		return nil, fmt.Errorf("the child kind %s is a view of another kind's objects; list the kind itself", what)
	}
	return k, nil
}

func splitAPIVersion(av string) (group, version string) {
	if g, v, ok := strings.Cut(av, "/"); ok {
		return g, v
	}
	return "", av
}

// children lists the existing children of parent: objects of the kinds ks (in parent's
// namespace when it is namespaced) with a controller ownerReference to parent's uid.
func (r *hookReconciler) children(ctx context.Context, parentKind *kinds.Kind, parent *cache.Object, ks []*kinds.Kind) (childSet, error) {
	uid := parent.UID()
	var out childSet
	for _, k := range ks {
		var opts []cache.ListOption
		if parentKind.Namespaced {
			if !k.Namespaced {
				continue
			}
			opts = append(opts, cache.InNamespace(parent.Key().Namespace))
		}
		res, err := r.client.List(ctx, k.GroupResource(), opts...)
		if err != nil {
			return nil, err
		}
		for _, o := range res.Items {
			if !bytes.Contains(o.Raw(), []byte(uid)) {
				continue // cannot hold a reference to parent
			}
			doc, err := o.Decode()
			if err != nil || !controlledBy(doc, uid) {
				continue
			}
			out = append(out, child{kind: k, key: o.Key(), uid: o.UID(), obj: inVersion(doc, k)})
		}
	}
	return out, nil
}

// controlledBy reports whether obj has a controller ownerReference to uid.
func controlledBy(obj map[string]any, uid string) bool {
	md, _ := obj["metadata"].(map[string]any)
	refs, _ := md["ownerReferences"].([]any)
	for _, r := range refs {
		m, _ := r.(map[string]any)
		if c, _ := m["controller"].(bool); c && m["uid"] == uid {
			return true
		}
	}
	return false
}

// desiredChild is one child of a hook's answer, checked and ready to apply.
type desiredChild struct {
	kind *kinds.Kind
	key  cache.Key
	obj  map[string]any
}

// desiredChildren checks the children of an answer (a listed kind, a name, the right
// namespace, no duplicates) and gives each a controller ownerReference to parent. Nothing is
// written unless every child is valid.
func (r *hookReconciler) desiredChildren(parentKind *kinds.Kind, parent *cache.Object, ks []*kinds.Kind, answer []map[string]any) ([]desiredChild, error) {
	allowed := make(map[string]*kinds.Kind, len(ks))
	names := make([]string, 0, len(ks))
	for _, k := range ks {
		allowed[childKey(k)] = k
		names = append(names, k.GroupVersion()+" "+k.Kind)
	}
	pk := parent.Key()
	owner := map[string]any{
		"apiVersion": parentKind.GroupVersion(), "kind": parentKind.Kind, "name": pk.Name, "uid": parent.UID(),
		"controller": true, "blockOwnerDeletion": true,
	}
	seen := map[cache.Key]bool{}
	out := make([]desiredChild, 0, len(answer))
	for i, c := range answer {
		if c == nil {
			return nil, fmt.Errorf("children[%d] is null", i)
		}
		av, kd := stringOf(c["apiVersion"]), stringOf(c["kind"])
		k, ok := allowed[kd+"."+av]
		if !ok {
			listed := "no kinds"
			if len(names) > 0 {
				listed = strings.Join(names, ", ")
			}
			return nil, fmt.Errorf("children[%d] is a %q %q, which the Controller's spec.children does not list (it lists %s)", i, av, kd, listed)
		}
		md, ok := c["metadata"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("children[%d] has no metadata", i)
		}
		name := stringOf(md["name"])
		if name == "" {
			return nil, fmt.Errorf("children[%d] has no metadata.name (generateName cannot be used: a child is found again by its name)", i)
		}
		ns := stringOf(md["namespace"])
		switch {
		case parentKind.Namespaced && !k.Namespaced:
			return nil, fmt.Errorf("children[%d]: a cluster-scoped %s cannot be owned by a namespaced %s", i, k.Kind, parentKind.Kind)
		case parentKind.Namespaced:
			if ns != "" && ns != pk.Namespace {
				return nil, fmt.Errorf("children[%d] is in namespace %q; the children of %s are in its namespace %q", i, ns, pk.Name, pk.Namespace)
			}
			ns = pk.Namespace
		case k.Namespaced && ns == "":
			return nil, fmt.Errorf("children[%d] needs metadata.namespace: its owner %s is cluster-scoped", i, parentKind.Kind)
		case !k.Namespaced:
			ns = ""
		}
		gr := k.GroupResource()
		key := cache.Key{Group: gr.Group, Resource: gr.Resource, Namespace: ns, Name: name}
		if seen[key] {
			return nil, fmt.Errorf("children[%d]: %s %s is given twice", i, k.Kind, name)
		}
		seen[key] = true
		if ns != "" {
			md["namespace"] = ns
		}
		refs, _ := md["ownerReferences"].([]any)
		kept := make([]any, 0, len(refs)+1)
		for _, ref := range refs {
			if m, _ := ref.(map[string]any); m == nil || m["uid"] != parent.UID() {
				kept = append(kept, ref)
			}
		}
		md["ownerReferences"] = append(kept, owner)
		out = append(out, desiredChild{kind: k, key: key, obj: c})
	}
	return out, nil
}

// applyChildren makes the children match desired: each applied (created or updated), and the
// existing ones not desired deleted.
func (r *hookReconciler) applyChildren(ctx context.Context, desired []desiredChild, existing childSet) error {
	keep := make(map[cache.Key]bool, len(desired))
	for _, d := range desired {
		if _, err := r.client.Apply(ctx, d.key, d.obj); err != nil {
			return fmt.Errorf("applying the child %s %s: %w", d.kind.Kind, objectName(d.key), err)
		}
		keep[d.key] = true
	}
	for _, c := range existing {
		if keep[c.key] {
			continue
		}
		if _, _, err := r.client.Delete(ctx, c.key, cache.Preconditions{UID: c.uid}); err != nil && !errors.Is(err, cache.ErrNotFound) {
			return fmt.Errorf("deleting the child %s %s: %w", c.kind.Kind, objectName(c.key), err)
		}
	}
	return nil
}

func objectName(k cache.Key) string {
	if k.Namespace == "" {
		return k.Name
	}
	return k.Namespace + "/" + k.Name
}

func stringOf(v any) string {
	s, _ := v.(string)
	return s
}
