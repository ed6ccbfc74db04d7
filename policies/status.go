package policies

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/cel/openapi/resolver"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

// The type-checking controller: kube-controller-manager's validatingadmissionpolicy-status
// controller, which writes a ValidatingAdmissionPolicy's status.observedGeneration and
// status.typeChecking (apiserver's TypeChecker's warnings: expressions that do not check
// against the schemas of the kinds the policy matches).

// StatusWriter writes the status of a policy (registry.Client, as the controller's manager).
type StatusWriter interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
	UpdateStatus(ctx context.Context, key cache.Key, obj map[string]any) (*cache.Object, error)
}

// StatusController keeps the policies' status.typeChecking. Run it on the leader.
type StatusController struct {
	client  StatusWriter
	checker *validating.TypeChecker
	kinds   *kinds.Registry
	log     *slog.Logger
}

// StatusControllerName is kube-controller-manager's name of the controller (its field manager).
const StatusControllerName = "validatingadmissionpolicy-status"

// NewStatusController makes the controller over client and the served kinds.
func NewStatusController(client StatusWriter, ks *kinds.Registry, log *slog.Logger) *StatusController {
	if log == nil {
		log = slog.Default()
	}
	return &StatusController{client: client, kinds: ks, log: log,
		checker: &validating.TypeChecker{SchemaResolver: schemas{ks}, RestMapper: restMapper{ks}}}
}

// Run checks every policy whose generation its status has not observed, as the policies
// change, until ctx is done.
func (c *StatusController) Run(ctx context.Context) error {
	pending := make(chan []cache.Key, 1)
	done := make(chan struct{})
	go func() { // owned by Run: it waits for done
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case keys := <-pending:
				for _, k := range keys {
					if err := c.reconcile(ctx, k); err != nil && ctx.Err() == nil {
						c.log.Info("policy type checking", "name", k.Name, "err", err)
					}
				}
			}
		}
	}()
	err := cache.Mirror(ctx, c.client, cache.WatchOptions{Resources: []cache.GroupResource{ValidatingResource}}, func(objs map[cache.Key]*cache.Object) {
		var keys []cache.Key
		for k, o := range objs {
			if stale(o) {
				keys = append(keys, k)
			}
		}
		if len(keys) == 0 {
			return
		}
		select { // the latest set wins: a worker busy with the last one takes it next
		case <-pending:
		default:
		}
		pending <- keys
	}, nil)
	<-done
	return err
}

// stale reports whether o's status has not observed its generation.
func stale(o *cache.Object) bool {
	var p struct {
		Status struct {
			ObservedGeneration int64 `json:"observedGeneration"`
		} `json:"status"`
	}
	_ = json.Unmarshal(o.Raw(), &p)
	return o.Generation() > p.Status.ObservedGeneration
}

// reconcile writes the type checking of the policy at key, if its generation is new.
func (c *StatusController) reconcile(ctx context.Context, key cache.Key) error {
	o, err := c.client.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		return nil
	}
	if err != nil || !stale(o) {
		return err
	}
	var p admissionregistrationv1.ValidatingAdmissionPolicy
	if err := json.Unmarshal(o.Raw(), &p); err != nil {
		return err
	}
	warnings := c.checker.Check(&p)
	if warnings == nil {
		warnings = []admissionregistrationv1.ExpressionWarning{}
	}
	p.Status.ObservedGeneration = p.Generation
	p.Status.TypeChecking = &admissionregistrationv1.TypeChecking{ExpressionWarnings: warnings}
	raw, err := json.Marshal(&p)
	if err != nil {
		return err
	}
	obj, err := cache.DecodeJSON(raw)
	if err != nil {
		return err
	}
	_, err = c.client.UpdateStatus(ctx, key, obj)
	return err
}

// schemas resolves a kind's OpenAPI schema from the served kinds (resolver.SchemaResolver), as
// kube-controller-manager's resolver does from the API's definitions and discovery.
type schemas struct{ ks *kinds.Registry }

func (s schemas) ResolveSchema(gvk schema.GroupVersionKind) (*spec.Schema, error) {
	k, ok := s.ks.ForKind(gvk.GroupVersion().String(), gvk.Kind)
	if !ok || k.Schema == nil {
		return nil, fmt.Errorf("%w: %v", resolver.ErrSchemaNotFound, gvk)
	}
	if d, ok := k.Schema.(kinds.Definer); ok {
		root, defs := d.Definitions()
		parsed := map[string]*spec.Schema{}
		for name, raw := range defs {
			sc := &spec.Schema{}
			if err := json.Unmarshal(raw, sc); err != nil {
				return nil, err
			}
			parsed["#/components/schemas/"+name] = sc
		}
		return resolver.PopulateRefs(func(ref string) (*spec.Schema, bool) {
			sc, ok := parsed[ref]
			return sc, ok
		}, "#/components/schemas/"+root)
	}
	raw, err := json.Marshal(k.Schema.OpenAPI())
	if err != nil {
		return nil, err
	}
	sc := &spec.Schema{}
	return sc, json.Unmarshal(raw, sc)
}

// restMapper maps the resources a policy matches to their kinds, from the served kinds (the
// part of meta.RESTMapper the type checker uses).
type restMapper struct{ ks *kinds.Registry }

func (m restMapper) mapper() meta.RESTMapper {
	var gvs []schema.GroupVersion
	seen := map[schema.GroupVersion]bool{}
	all := m.ks.All()
	for _, k := range all {
		gv := schema.GroupVersion{Group: k.Group, Version: k.Version}
		if !seen[gv] {
			seen[gv] = true
			gvs = append(gvs, gv)
		}
	}
	dm := meta.NewDefaultRESTMapper(gvs)
	for _, k := range all {
		scope := meta.RESTScopeRoot
		if k.Namespaced {
			scope = meta.RESTScopeNamespace
		}
		dm.AddSpecific(schema.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind},
			schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: k.Plural},
			schema.GroupVersionResource{Group: k.Group, Version: k.Version, Resource: strings.ToLower(k.Kind)}, scope)
	}
	return dm
}

func (m restMapper) KindFor(r schema.GroupVersionResource) (schema.GroupVersionKind, error) {
	return m.mapper().KindFor(r)
}
func (m restMapper) KindsFor(r schema.GroupVersionResource) ([]schema.GroupVersionKind, error) {
	return m.mapper().KindsFor(r)
}
func (m restMapper) ResourceFor(r schema.GroupVersionResource) (schema.GroupVersionResource, error) {
	return m.mapper().ResourceFor(r)
}
func (m restMapper) ResourcesFor(r schema.GroupVersionResource) ([]schema.GroupVersionResource, error) {
	return m.mapper().ResourcesFor(r)
}
func (m restMapper) RESTMapping(gk schema.GroupKind, versions ...string) (*meta.RESTMapping, error) {
	return m.mapper().RESTMapping(gk, versions...)
}
func (m restMapper) RESTMappings(gk schema.GroupKind, versions ...string) ([]*meta.RESTMapping, error) {
	return m.mapper().RESTMappings(gk, versions...)
}
func (m restMapper) ResourceSingularizer(resource string) (string, error) {
	return m.mapper().ResourceSingularizer(resource)
}
