package kinds

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The admission policies' validation: the required fields and enumerations of
// kube-apiserver's admissionregistration validation, in its order and words. (Compiling the
// CEL expressions at write time, as kube-apiserver also does, is not done here: a policy that
// does not compile denies what it matches, and its status.typeChecking says why.)

func validateValidatingAdmissionPolicy(p *admissionregistrationv1.ValidatingAdmissionPolicy) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if p.Spec.FailurePolicy != nil {
		errs = append(errs, notSupported(spec.Child("failurePolicy"), string(*p.Spec.FailurePolicy), failurePolicies)...)
	}
	if p.Spec.MatchConstraints == nil {
		errs = append(errs, field.Required(spec.Child("matchConstraints"), ""))
	}
	if len(p.Spec.Validations) == 0 && len(p.Spec.AuditAnnotations) == 0 {
		errs = append(errs, field.Required(spec.Child("validations"), "validations or auditAnnotations must contain at least one item"),
			field.Required(spec.Child("auditAnnotations"), "validations or auditAnnotations must contain at least one item"))
	}
	for i, v := range p.Spec.Validations {
		if v.Expression == "" {
			errs = append(errs, field.Required(spec.Child("validations").Index(i).Child("expression"), ""))
		}
	}
	return errs
}

func validateValidatingAdmissionPolicyBinding(b *admissionregistrationv1.ValidatingAdmissionPolicyBinding) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if b.Spec.PolicyName == "" {
		errs = append(errs, field.Required(spec.Child("policyName"), ""))
	}
	if len(b.Spec.ValidationActions) == 0 {
		errs = append(errs, field.Required(spec.Child("validationActions"), ""))
	}
	for i, a := range b.Spec.ValidationActions {
		errs = append(errs, notSupported(spec.Child("validationActions").Index(i), string(a), []string{"Audit", "Deny", "Warn"})...)
	}
	errs = append(errs, validateParamRef(b.Spec.ParamRef, spec.Child("paramRef"))...)
	return errs
}

func validateMutatingAdmissionPolicy(p *admissionregistrationv1.MutatingAdmissionPolicy) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if p.Spec.FailurePolicy != nil {
		errs = append(errs, notSupported(spec.Child("failurePolicy"), string(*p.Spec.FailurePolicy), failurePolicies)...)
	}
	if p.Spec.MatchConstraints == nil {
		errs = append(errs, field.Required(spec.Child("matchConstraints"), ""))
	}
	if len(p.Spec.Mutations) == 0 {
		errs = append(errs, field.Required(spec.Child("mutations"), "mutations must contain at least one item"))
	}
	for i, m := range p.Spec.Mutations {
		path := spec.Child("mutations").Index(i)
		switch m.PatchType {
		case admissionregistrationv1.PatchTypeApplyConfiguration:
			if m.ApplyConfiguration == nil {
				errs = append(errs, field.Required(path.Child("applyConfiguration"), "must be specified when patchType is ApplyConfiguration"))
			}
		case admissionregistrationv1.PatchTypeJSONPatch:
			if m.JSONPatch == nil {
				errs = append(errs, field.Required(path.Child("jsonPatch"), "must be specified when patchType is JSONPatch"))
			}
		case "":
			errs = append(errs, field.Required(path.Child("patchType"), ""))
		default:
			errs = append(errs, field.NotSupported(path.Child("patchType"), m.PatchType, []string{"ApplyConfiguration", "JSONPatch"}))
		}
	}
	if p.Spec.ReinvocationPolicy == "" {
		errs = append(errs, field.Required(spec.Child("reinvocationPolicy"), ""))
	} else {
		errs = append(errs, notSupported(spec.Child("reinvocationPolicy"), string(p.Spec.ReinvocationPolicy), []string{"IfNeeded", "Never"})...)
	}
	return errs
}

func validateMutatingAdmissionPolicyBinding(b *admissionregistrationv1.MutatingAdmissionPolicyBinding) field.ErrorList {
	spec := field.NewPath("spec")
	var errs field.ErrorList
	if b.Spec.PolicyName == "" {
		errs = append(errs, field.Required(spec.Child("policyName"), ""))
	}
	return append(errs, validateParamRef(b.Spec.ParamRef, spec.Child("paramRef"))...)
}

func validateParamRef(r *admissionregistrationv1.ParamRef, path *field.Path) field.ErrorList {
	if r == nil {
		return nil
	}
	var errs field.ErrorList
	if r.Name != "" && r.Selector != nil {
		errs = append(errs, field.Forbidden(path.Child("name"), `name and selector are mutually exclusive`),
			field.Forbidden(path.Child("selector"), `name and selector are mutually exclusive`))
	}
	if r.ParameterNotFoundAction == nil {
		errs = append(errs, field.Required(path.Child("parameterNotFoundAction"), ""))
	} else {
		errs = append(errs, notSupported(path.Child("parameterNotFoundAction"), string(*r.ParameterNotFoundAction), []string{"Allow", "Deny"})...)
	}
	return errs
}

// notSupported is field.NotSupported when v is not one of allowed.
func notSupported(path *field.Path, v string, allowed []string) field.ErrorList {
	for _, a := range allowed {
		if v == a {
			return nil
		}
	}
	return field.ErrorList{field.NotSupported(path, v, allowed)}
}
