package policies

import (
	"sync"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
)

// The compilation of a policy, as the ValidatingAdmissionPolicy and MutatingAdmissionPolicy
// plugins of k8s.io/apiserver compile one (their compilePolicy functions, unexported there):
// the same CEL environment (the base environment set of the compatibility version, the one
// CRD validation rules use), the same declarations (params when the policy has a paramKind,
// the authorizer except in message expressions), the same composition of variables.

var (
	baseEnvOnce sync.Once
	baseEnv     *environment.EnvSet
)

// envSet is kube-apiserver's base CEL environment, made once (it is costly and immutable).
func envSet() *environment.EnvSet {
	baseEnvOnce.Do(func() { baseEnv = environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()) })
	return baseEnv
}

// compileValidating compiles a ValidatingAdmissionPolicy; a compilation error is the
// Validator's, reported when the policy is evaluated (as kube-apiserver's does).
func compileValidating(p *admissionregistrationv1.ValidatingAdmissionPolicy) validating.Validator {
	opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	messageOpts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil}
	c, err := plugincel.NewCompositedCompiler(envSet())
	if err != nil {
		return validating.NewValidator(nil, nil, nil, nil, p.Spec.FailurePolicy, err)
	}
	c.CompileAndStoreVariables(variables(p.Spec.Variables), opts, environment.StoredExpressions)
	matcher := matchConditions(c, p.Spec.MatchConditions, opts, p.Spec.FailurePolicy, "validate", p.Name)
	checks := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(p.Spec.Validations))
	for i, v := range p.Spec.Validations {
		checks[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	audits := make([]plugincel.ExpressionAccessor, len(p.Spec.AuditAnnotations))
	for i, a := range p.Spec.AuditAnnotations {
		audits[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	return validating.NewValidator(
		c.CompileCondition(checks, opts, environment.StoredExpressions),
		matcher,
		c.CompileCondition(audits, opts, environment.StoredExpressions),
		c.CompileCondition(messages, messageOpts, environment.StoredExpressions),
		p.Spec.FailurePolicy, nil)
}

// compileMutating compiles a MutatingAdmissionPolicy.
func compileMutating(p *admissionregistrationv1.MutatingAdmissionPolicy) mutating.PolicyEvaluator {
	opts := plugincel.OptionalVariableDeclarations{HasParams: p.Spec.ParamKind != nil, HasAuthorizer: true}
	c, err := plugincel.NewCompositedCompiler(envSet())
	if err != nil {
		return mutating.PolicyEvaluator{Error: err}
	}
	c.CompileAndStoreVariables(variables(p.Spec.Variables), opts, environment.StoredExpressions)
	matcher := matchConditions(c, p.Spec.MatchConditions, opts, p.Spec.FailurePolicy, "validate", p.Name)
	patchOpts := opts
	patchOpts.HasPatchTypes = true
	var patchers []patch.Patcher
	for _, m := range p.Spec.Mutations {
		switch {
		case m.PatchType == admissionregistrationv1.PatchTypeJSONPatch && m.JSONPatch != nil:
			r := c.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}, patchOpts, environment.StoredExpressions)
			patchers = append(patchers, patch.NewJSONPatcher(r))
		case m.PatchType == admissionregistrationv1.PatchTypeApplyConfiguration && m.ApplyConfiguration != nil:
			r := c.CompileMutatingEvaluator(&patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}, patchOpts, environment.StoredExpressions)
			patchers = append(patchers, patch.NewApplyConfigurationPatcher(r))
		}
	}
	return mutating.PolicyEvaluator{Matcher: matcher, Mutators: patchers, CompositedCompiler: c}
}

func variables(vs []admissionregistrationv1.Variable) []plugincel.NamedExpressionAccessor {
	out := make([]plugincel.NamedExpressionAccessor, len(vs))
	for i, v := range vs {
		out[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	return out
}

// matchConditions compiles a policy's matchConditions (nil when it has none).
func matchConditions(c *plugincel.CompositedCompiler, conds []admissionregistrationv1.MatchCondition, opts plugincel.OptionalVariableDeclarations,
	failure *admissionregistrationv1.FailurePolicyType, verb, name string) matchconditions.Matcher {
	if len(conds) == 0 {
		return nil
	}
	acc := make([]plugincel.ExpressionAccessor, len(conds))
	for i := range conds {
		acc[i] = (*matchconditions.MatchCondition)(&conds[i])
	}
	return matchconditions.NewMatcher(c.CompileCondition(acc, opts, environment.StoredExpressions), failure, "policy", verb, name)
}
