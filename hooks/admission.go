package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/metrics"
	"github.com/opemu/opemu/webhooks"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
)

// The admission webhooks configured in the API (SPEC §15): every ValidatingWebhookConfiguration
// and MutatingWebhookConfiguration becomes handlers of the write path's chain, after the
// built-in ones, kept current by watching the configuration objects.

// Resources of the webhook configurations. Writes to them are never sent to a webhook, as
// kube-apiserver exempts them, so a broken webhook can always be removed.
var (
	ValidatingResource = cache.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingwebhookconfigurations"}
	MutatingResource   = cache.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingwebhookconfigurations"}
)

// Reader is how the webhooks read the API: the in-process client (registry.Client).
type Reader interface {
	Get(ctx context.Context, key cache.Key) (*cache.Object, error)
	Watch(ctx context.Context, opts cache.WatchOptions) (*cache.Watcher, error)
}

// AdmissionConfig configures Admission. Client and Kinds are required.
type AdmissionConfig struct {
	Client Reader
	// Kinds resolves the versions of a resource (matchPolicy Equivalent) and scale views.
	Kinds *kinds.Registry
	// Metrics may be nil.
	Metrics *metrics.Registry
	// Logger nil means slog.Default().
	Logger *slog.Logger
}

// Admission is the set of configured admission webhooks, as webhooks.Configured: set it as the
// write path's Chain.Configured and run it with Run. Safe for concurrent use.
type Admission struct {
	cfg AdmissionConfig
	log *slog.Logger
	// set is the current handlers, replaced whole on every change of a configuration.
	set atomic.Pointer[handlerSet]
}

type handlerSet struct {
	mutating, validating []webhooks.Named
	hooks                []*webhook // every webhook of both, for closing their connections
}

var _ webhooks.Configured = (*Admission)(nil)

// NewAdmission validates cfg.
func NewAdmission(cfg AdmissionConfig) (*Admission, error) {
	if cfg.Client == nil || cfg.Kinds == nil {
		return nil, errors.New("hooks: Client and Kinds are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	a := &Admission{cfg: cfg, log: cfg.Logger}
	a.set.Store(&handlerSet{})
	return a, nil
}

// Handlers returns the configured mutating and validating webhooks as handlers: configurations
// by name, each one's webhooks in their order, as kube-apiserver calls them. One atomic load.
func (a *Admission) Handlers() (mutating, validating []webhooks.Named) {
	s := a.set.Load()
	return s.mutating, s.validating
}

// Run lists and watches the webhook configurations and keeps the handlers current until ctx is
// done, re-listing when its watch falls behind. With ctx done the handlers are dropped.
func (a *Admission) Run(ctx context.Context) error {
	defer a.publish(nil)
	err := cache.Mirror(ctx, a.cfg.Client, cache.WatchOptions{Resources: []cache.GroupResource{ValidatingResource, MutatingResource}}, a.publish,
		func(reason error) { a.log.Info("webhook configuration watch re-listing", "reason", reason) })
	if err != nil {
		a.log.Warn("webhook configuration watch", "err", err)
	}
	return nil
}

// publish replaces the handlers by those of objs.
func (a *Admission) publish(objs map[cache.Key]*cache.Object) {
	keys := make([]cache.Key, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y cache.Key) int { return strings.Compare(x.Name, y.Name) })
	next := &handlerSet{}
	for _, k := range keys {
		hooks, err := a.webhooksOf(objs[k])
		if err != nil {
			a.log.Warn("a webhook configuration that does not decode is ignored", "resource", k.Resource, "name", k.Name, "err", err)
			continue
		}
		for _, h := range hooks {
			n := webhooks.Named{Name: h.name, Handler: h, Matches: h.matches, External: true}
			if h.mutating {
				next.mutating = append(next.mutating, n)
			} else {
				next.validating = append(next.validating, n)
			}
			next.hooks = append(next.hooks, h)
		}
	}
	old := a.set.Swap(next)
	for _, h := range old.hooks {
		h.close()
	}
}

// webhooksOf decodes a configuration object into its webhooks.
func (a *Admission) webhooksOf(obj *cache.Object) ([]*webhook, error) {
	config := obj.Key().Name
	var out []*webhook
	switch obj.Key().GroupResource() {
	case MutatingResource:
		var c admissionregistrationv1.MutatingWebhookConfiguration
		if err := json.Unmarshal(obj.Raw(), &c); err != nil {
			return nil, err
		}
		for _, w := range c.Webhooks {
			out = append(out, a.newWebhook(config, true, spec{
				name: w.Name, clientConfig: w.ClientConfig, rules: w.Rules, failurePolicy: w.FailurePolicy,
				matchPolicy: w.MatchPolicy, namespaceSelector: w.NamespaceSelector, objectSelector: w.ObjectSelector,
				sideEffects: w.SideEffects, timeoutSeconds: w.TimeoutSeconds, reviewVersions: w.AdmissionReviewVersions,
			}))
		}
	case ValidatingResource:
		var c admissionregistrationv1.ValidatingWebhookConfiguration
		if err := json.Unmarshal(obj.Raw(), &c); err != nil {
			return nil, err
		}
		for _, w := range c.Webhooks {
			out = append(out, a.newWebhook(config, false, spec{
				name: w.Name, clientConfig: w.ClientConfig, rules: w.Rules, failurePolicy: w.FailurePolicy,
				matchPolicy: w.MatchPolicy, namespaceSelector: w.NamespaceSelector, objectSelector: w.ObjectSelector,
				sideEffects: w.SideEffects, timeoutSeconds: w.TimeoutSeconds, reviewVersions: w.AdmissionReviewVersions,
			}))
		}
	}
	return out, nil
}
