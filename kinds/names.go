package kinds

import (
	"strings"

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
