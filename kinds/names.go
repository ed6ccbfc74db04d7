package kinds

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"
)

// NameIsDNSSubdomain is apivalidation.NameIsDNSSubdomain, the rule of most kinds' names (and
// of Event names): the same messages for the same name. A loop does the work of its regular
// expression, which was the largest part of validating an object's metadata on every write,
// and which takes tens of milliseconds on a name of a megabyte (hundreds under -race), twice
// per refused write. FuzzNameIsDNSSubdomain checks the messages are apimachinery's.
func NameIsDNSSubdomain(name string, prefix bool) []string {
	if prefix && len(name) > 1 && strings.HasSuffix(name, "-") {
		// apivalidation's maskTrailingDash: a generateName may end in '-'.
		name = name[:len(name)-2] + "a"
	}
	var errs []string
	if len(name) > validation.DNS1123SubdomainMaxLength {
		errs = append(errs, validation.MaxLenError(validation.DNS1123SubdomainMaxLength))
	}
	if !isDNS1123SubdomainShape(name) {
		errs = append(errs, subdomainShapeError)
	}
	return errs
}

// subdomainShapeError is apimachinery's message for a name whose characters do not make an RFC
// 1123 subdomain; it names no part of the name, so it is asked for once, with a name that
// fails only that rule.
var subdomainShapeError = validation.IsDNS1123Subdomain("-")[0]

// NameIsDNSLabel is apivalidation.NameIsDNSLabel, the rule of Namespace, Service and
// StatefulSet names (an RFC 1123 label: at most 63 characters, no dots), with the same
// messages; like NameIsDNSSubdomain it runs no regular expression on the names it passes or on
// long ones.
func NameIsDNSLabel(name string, prefix bool) []string {
	if prefix && len(name) > 1 && strings.HasSuffix(name, "-") {
		name = name[:len(name)-2] + "a"
	}
	if DNSLabelValid(name) {
		return nil
	}
	var errs []string
	if len(name) > validation.DNS1123LabelMaxLength {
		errs = append(errs, validation.MaxLenError(validation.DNS1123LabelMaxLength))
	}
	switch {
	case isDNS1123SubdomainShape(name) && strings.Contains(name, "."):
		errs = append(errs, "must not contain dots")
	case !isDNS1123SubdomainShape(name):
		errs = append(errs, labelShapeError)
	}
	return errs
}

// labelShapeError is apimachinery's message for a name whose characters do not make an RFC
// 1123 label.
var labelShapeError = validation.IsDNS1123Label("-")[0]

// NameIsPathSegment is the rule of names kube-apiserver checks only as path segments (RBAC
// objects, PodDisruptionBudgets, v1 Events): not "." or "..", no '/' or '%'.
func NameIsPathSegment(name string, prefix bool) []string {
	if prefix {
		return content.IsPathSegmentPrefix(name)
	}
	return content.IsPathSegmentName(name)
}
