package policies

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
	"github.com/opemu/opemu/webhooks"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
)

// The policies' resources.
var (
	ValidatingResource        = cache.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}
	ValidatingBindingResource = cache.GroupResource{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicybindings"}
	MutatingResource          = cache.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicies"}
	MutatingBindingResource   = cache.GroupResource{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicybindings"}
)

// Config configures Policies. Client and Kinds are required.
type Config struct {
	Client Reader
	// Kinds resolves a policy's paramKind and the type of an object an apply configuration
	// mutates.
	Kinds *kinds.Registry
	// Authorizer answers CEL's authorizer checks; nil allows everything (AlwaysAllow).
	Authorizer authorizer.UnconditionalAuthorizer
	// Logger nil means slog.Default().
	Logger *slog.Logger
}

// Policies is the set of admission policies and bindings in the API, as webhooks.Configured:
// one validating handler (every ValidatingAdmissionPolicy) and one mutating handler (every
// MutatingAdmissionPolicy) while any policy is bound. Safe for concurrent use.
type Policies struct {
	cfg        Config
	log        *slog.Logger
	oi         *objectInterfaces
	matcher    generic.PolicyMatcher
	validating *validatingHandler
	mutating   *mutatingHandler
	set        atomic.Pointer[policySet]
}

type policySet struct {
	validatingHooks []validating.PolicyHook
	mutatingHooks   []mutating.PolicyHook
	// validatingPolicies and mutatingPolicies are the hooks' policies, for matching alone.
	validatingPolicies, mutatingPolicies []generic.PolicyAccessor
	mutating, valid                      []webhooks.Named
}

var _ webhooks.Configured = (*Policies)(nil)

// New validates cfg.
func New(cfg Config) (*Policies, error) {
	if cfg.Client == nil || cfg.Kinds == nil {
		return nil, errors.New("policies: Client and Kinds are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Authorizer == nil {
		cfg.Authorizer = authorizerfactory.NewAlwaysAllowAuthorizer()
	}
	p := &Policies{cfg: cfg, log: cfg.Logger, oi: newObjectInterfaces()}
	m := matching.NewMatcher(namespaces{cfg.Client}, nil)
	p.matcher = generic.NewPolicyMatcher(m)
	p.validating = &validatingHandler{p: p, dispatcher: validating.NewDispatcher(cfg.Authorizer, p.matcher)}
	p.mutating = &mutatingHandler{p: p, dispatcher: mutating.NewDispatcher(cfg.Authorizer, m, typeConverters{cfg.Kinds})}
	p.set.Store(&policySet{})
	return p, nil
}

// Handlers returns the policies' handlers as of now: one atomic load.
func (p *Policies) Handlers() (mutating, validating []webhooks.Named) {
	s := p.set.Load()
	return s.mutating, s.valid
}

// Bindings returns how many bindings of existing policies are in force now (validating,
// mutating): what a test or a dashboard waits for after writing one.
func (p *Policies) Bindings() (validating, mutating int) {
	s := p.set.Load()
	for _, h := range s.validatingHooks {
		validating += len(h.Bindings)
	}
	for _, h := range s.mutatingHooks {
		mutating += len(h.Bindings)
	}
	return validating, mutating
}

// Run lists and watches the policies and bindings and keeps the handlers current until ctx is
// done. With ctx done the handlers are dropped.
func (p *Policies) Run(ctx context.Context) error {
	defer p.set.Store(&policySet{})
	err := cache.Mirror(ctx, p.cfg.Client, cache.WatchOptions{Resources: []cache.GroupResource{
		ValidatingResource, ValidatingBindingResource, MutatingResource, MutatingBindingResource}}, p.publish,
		func(reason error) { p.log.Info("admission policy watch re-listing", "reason", reason) })
	if err != nil {
		p.log.Warn("admission policy watch", "err", err)
	}
	return nil
}

// publish compiles objs into hooks: each policy with the bindings that name it (a policy no
// binding names, or a binding of a missing policy, does nothing), as kube's policy source.
func (p *Policies) publish(objs map[cache.Key]*cache.Object) {
	keys := make([]cache.Key, 0, len(objs))
	for k := range objs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(x, y cache.Key) int { return strings.Compare(x.Name, y.Name) })
	vaps := map[string]*admissionregistrationv1.ValidatingAdmissionPolicy{}
	maps := map[string]*admissionregistrationv1.MutatingAdmissionPolicy{}
	var vbs []*admissionregistrationv1.ValidatingAdmissionPolicyBinding
	var mbs []*admissionregistrationv1.MutatingAdmissionPolicyBinding
	for _, k := range keys {
		raw := objs[k].Raw()
		var err error
		switch k.GroupResource() {
		case ValidatingResource:
			v := &admissionregistrationv1.ValidatingAdmissionPolicy{}
			err = json.Unmarshal(raw, v)
			vaps[v.Name] = v
		case ValidatingBindingResource:
			v := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
			err = json.Unmarshal(raw, v)
			vbs = append(vbs, v)
		case MutatingResource:
			v := &admissionregistrationv1.MutatingAdmissionPolicy{}
			err = json.Unmarshal(raw, v)
			maps[v.Name] = v
		case MutatingBindingResource:
			v := &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
			err = json.Unmarshal(raw, v)
			mbs = append(mbs, v)
		}
		if err != nil {
			p.log.Warn("an admission policy that does not decode is ignored", "resource", k.Resource, "name", k.Name, "err", err)
		}
	}
	old := p.set.Load()
	next := &policySet{}
	bound(vaps, vbs, func(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) string { return b.Spec.PolicyName },
		func(policy *admissionregistrationv1.ValidatingAdmissionPolicy, bindings []*admissionregistrationv1.ValidatingAdmissionPolicyBinding) {
			hook := validating.PolicyHook{Policy: policy, Bindings: bindings}
			hook.Evaluator = reuse(old.validatingHooks, policy, func(h validating.PolicyHook) (*admissionregistrationv1.ValidatingAdmissionPolicy, validating.Validator) {
				return h.Policy, h.Evaluator
			}, compileValidating)
			next.validatingHooks = append(next.validatingHooks, hook)
			next.validatingPolicies = append(next.validatingPolicies, validating.NewValidatingAdmissionPolicyAccessor(policy))
		})
	bound(maps, mbs, func(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) string { return b.Spec.PolicyName },
		func(policy *admissionregistrationv1.MutatingAdmissionPolicy, bindings []*admissionregistrationv1.MutatingAdmissionPolicyBinding) {
			hook := mutating.PolicyHook{Policy: policy, Bindings: bindings}
			hook.Evaluator = reuse(old.mutatingHooks, policy, func(h mutating.PolicyHook) (*admissionregistrationv1.MutatingAdmissionPolicy, mutating.PolicyEvaluator) {
				return h.Policy, h.Evaluator
			}, compileMutating)
			next.mutatingHooks = append(next.mutatingHooks, hook)
			next.mutatingPolicies = append(next.mutatingPolicies, mutating.NewMutatingAdmissionPolicyAccessor(policy))
		})
	if len(next.validatingHooks) > 0 {
		next.valid = []webhooks.Named{{Name: validating.PluginName, Handler: p.validating, Matches: notPolicyWrite}}
	}
	if len(next.mutatingHooks) > 0 {
		// External: what a policy's mutation makes is pruned and defaulted again.
		next.mutating = []webhooks.Named{{Name: mutating.PluginName, Handler: p.mutating, Matches: notPolicyWrite, External: true}}
	}
	p.set.Store(next)
}

// matchesAny reports whether some policy's matchConstraints take req, by apiserver's matcher on
// the request's own objects: a write no policy names is admitted without the copy of its
// objects the dispatchers need. An error in matching is the dispatcher's to report.
func (p *Policies) matchesAny(req *webhooks.Request, policies []generic.PolicyAccessor) bool {
	a := matchAttributes(req)
	for _, acc := range policies {
		if ok, _, _, err := p.matcher.DefinitionMatches(a, p.oi, acc); ok || err != nil {
			return true
		}
	}
	return false
}

// reuse returns the evaluator of the hook of old compiled from the same policy (same uid and
// generation: its spec unchanged), or compiles policy: compiling CEL is costly, and a burst of
// binding or status changes must not recompile every policy.
func reuse[H any, P interface {
	GetUID() types.UID
	GetGeneration() int64
}, E any](old []H, policy P, of func(H) (P, E), compile func(P) E) E {
	for _, h := range old {
		if q, e := of(h); q.GetUID() == policy.GetUID() && q.GetGeneration() == policy.GetGeneration() {
			return e
		}
	}
	return compile(policy)
}

// bound calls each for every policy of policies with the bindings that name it (policyName),
// in order of the policies' names; a policy no binding names, or a binding of a missing policy,
// does nothing, as in kube's policy source.
func bound[P, B any](policies map[string]P, bindings []B, policyName func(B) string, each func(P, []B)) {
	byPolicy := map[string][]B{}
	for _, b := range bindings {
		byPolicy[policyName(b)] = append(byPolicy[policyName(b)], b)
	}
	for _, name := range sortedKeys(byPolicy) {
		if policy, ok := policies[name]; ok {
			each(policy, byPolicy[name])
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// notPolicyWrite exempts writes of the policies and bindings themselves, as kube-apiserver
// excludes admissionregistration's resources from admission policies (so a bad policy can
// always be removed).
func notPolicyWrite(req *webhooks.Request) bool {
	return req.Resource.Group != "admissionregistration.k8s.io"
}
