package policies

import (
	"context"
	"errors"
	"maps"
	"slices"

	"github.com/opemu/opemu/calls"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/webhooks"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/warning"
)

// validatingHandler runs every bound ValidatingAdmissionPolicy on a request, through
// apiserver's validating dispatcher.
type validatingHandler struct {
	p          *Policies
	dispatcher generic.Dispatcher[validating.PolicyHook]
}

func (h *validatingHandler) Handle(ctx context.Context, req *webhooks.Request) webhooks.Response {
	set := h.p.set.Load()
	if !h.p.matchesAny(req, set.validatingPolicies) {
		return webhooks.Allowed()
	}
	hooks := withParams(h.p, set.validatingHooks, func(hk *validating.PolicyHook) (string, string, bool) {
		if pk := hk.Policy.Spec.ParamKind; pk != nil {
			return pk.APIVersion, pk.Kind, true
		}
		return "", "", false
	}, func(hk *validating.PolicyHook) *generic.PolicyHook[*validating.Policy, *validating.PolicyBinding, validating.Validator] {
		return (*generic.PolicyHook[*validating.Policy, *validating.PolicyBinding, validating.Validator])(hk)
	})
	a := attributes(req)
	var warnings recorder
	// kube-apiserver's audit decorator gathers the annotations the policies make (their
	// auditAnnotations as "<policy>/<key>", an Audit action's failures as
	// "validation.policy.admission.k8s.io/validation_failure") into the audit context; from
	// there they go to the request's call, whose audit log Event carries them.
	actx := audit.WithAuditContext(warning.WithWarningRecorder(ctx, &warnings))
	_ = audit.AuditContextFrom(actx).Init(audit.RequestAuditConfig{Level: auditinternal.LevelMetadata}, nil)
	dispatch := validator(func(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
		return h.dispatcher.Dispatch(ctx, a, o, hooks)
	})
	err := admission.WithAudit(dispatch).(admission.ValidationInterface).Validate(actx, a, h.p.oi)
	calls.AddAnnotations(ctx, audit.AuditContextFrom(actx).GetEventAnnotations())
	return verdict(err, warnings)
}

// validator is one request's dispatch as an admission plugin (for admission.WithAudit).
type validator func(context.Context, admission.Attributes, admission.ObjectInterfaces) error

func (validator) Handles(admission.Operation) bool { return true }

func (v validator) Validate(ctx context.Context, a admission.Attributes, o admission.ObjectInterfaces) error {
	return v(ctx, a, o)
}

// mutatingHandler runs every bound MutatingAdmissionPolicy on a request, through apiserver's
// mutating dispatcher, and puts the mutated object in req.Object.
type mutatingHandler struct {
	p          *Policies
	dispatcher generic.Dispatcher[mutating.PolicyHook]
}

func (h *mutatingHandler) Handle(ctx context.Context, req *webhooks.Request) webhooks.Response {
	return h.HandleInPlace(ctx, req)
}

// HandleInPlace makes the policies' mutations on req.Object itself (webhooks.InPlace).
func (h *mutatingHandler) HandleInPlace(ctx context.Context, req *webhooks.Request) webhooks.Response {
	if req.Operation == webhooks.Delete {
		return webhooks.Allowed() // there is no object to mutate: the plugin does not handle DELETE
	}
	set := h.p.set.Load()
	if !h.p.matchesAny(req, set.mutatingPolicies) {
		return webhooks.Allowed()
	}
	hooks := withParams(h.p, set.mutatingHooks, func(hk *mutating.PolicyHook) (string, string, bool) {
		if pk := hk.Policy.Spec.ParamKind; pk != nil {
			return pk.APIVersion, pk.Kind, true
		}
		return "", "", false
	}, func(hk *mutating.PolicyHook) *generic.PolicyHook[*mutating.Policy, *mutating.PolicyBinding, mutating.PolicyEvaluator] {
		return (*generic.PolicyHook[*mutating.Policy, *mutating.PolicyBinding, mutating.PolicyEvaluator])(hk)
	})
	a := attributes(req)
	var warnings recorder
	err := h.dispatcher.Dispatch(warning.WithWarningRecorder(ctx, &warnings), a, h.p.oi, hooks)
	res := verdict(err, warnings)
	if res.Allowed {
		if u, ok := a.GetObject().(*unstructured.Unstructured); ok && u != nil {
			clear(req.Object)
			maps.Copy(req.Object, u.Object)
		}
	}
	return res
}

// withParams returns hooks with the informer and scope of each one's paramKind resolved now
// (a CRD defined after the policy serves its parameters from then on); a paramKind no kind
// answers is the hook's configuration error, in kube's words.
func withParams[H any, P, B runtime.Object, E generic.Evaluator](p *Policies, hooks []H, paramKind func(*H) (string, string, bool), asGeneric func(*H) *generic.PolicyHook[P, B, E]) []H {
	if len(hooks) == 0 {
		return nil
	}
	out := slices.Clone(hooks)
	for i := range out {
		apiVersion, kind, ok := paramKind(&out[i])
		if !ok {
			continue
		}
		g := asGeneric(&out[i])
		inf, scope, found := paramsFor(p.cfg.Client, p.cfg.Kinds, apiVersion, kind)
		if !found {
			gv, _ := schema.ParseGroupVersion(apiVersion)
			g.ConfigurationError = errors.New("failed to find resource referenced by paramKind: '" + gv.WithKind(kind).String() + "'")
			continue
		}
		g.ParamInformer, g.ParamScope = inf, scope
	}
	return out
}

// verdict turns the dispatcher's answer into the chain's: a StatusError keeps its code,
// reason, message and details (kube's words); any other error is a 500 as kube-apiserver's
// admission answers one.
func verdict(err error, warnings recorder) webhooks.Response {
	if err == nil {
		return webhooks.Allowed(warnings...)
	}
	var se *apierrors.StatusError
	if !errors.As(err, &se) {
		se = apierrors.NewInternalError(err)
	}
	st := se.ErrStatus
	return webhooks.Response{Allowed: false, Result: &metav1.Status{Code: st.Code, Reason: st.Reason, Message: st.Message, Details: st.Details}, Warnings: warnings}
}

// recorder collects the warnings of Warn actions (warning.Recorder).
type recorder []string

func (r *recorder) AddWarning(_, text string) { *r = append(*r, text) }

// typeConverters gives the mutating dispatcher the structured-merge-diff types of a kind
// (apply configurations merge by them): a built-in kind's from its Go type, a custom
// resource's deduced from the object, as opemu's server-side apply does.
type typeConverters struct{ ks *kinds.Registry }

func (t typeConverters) GetTypeConverter(gvk schema.GroupVersionKind) managedfields.TypeConverter {
	if k, ok := t.ks.ForKind(gvk.GroupVersion().String(), gvk.Kind); ok && k.TypeConverter != nil {
		return k.TypeConverter
	}
	return managedfields.NewDeducedTypeConverter()
}

func (typeConverters) Run(context.Context) {}
