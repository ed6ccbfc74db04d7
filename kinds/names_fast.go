package kinds

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// The name and label rules without regular expressions, for the write path: each answers
// "valid" for the names nearly every object has, or "do not know", and the caller then asks
// apimachinery, which also words the errors. FuzzNameIsDNSSubdomain, FuzzLabelsValid and
// FuzzDNSLabelValid hold them to apimachinery's rules.

// isDNS1123Subdomain reports whether s is an RFC 1123 subdomain as Kubernetes defines it: at
// most 253 characters, dot-separated labels of lower-case letters, digits and '-', each
// beginning and ending with a letter or digit.
func isDNS1123Subdomain(s string) bool {
	return len(s) <= validation.DNS1123SubdomainMaxLength && isDNS1123SubdomainShape(s)
}

// isDNS1123SubdomainShape is isDNS1123Subdomain of any length: apimachinery's expression
// ^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$, in one pass.
func isDNS1123SubdomainShape(s string) bool {
	if len(s) == 0 {
		return false
	}
	start := 0 // of the current label
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == '.' {
			if i == start || s[start] == '-' || s[i-1] == '-' {
				return false // empty, or beginning or ending with '-'
			}
			start = i + 1
			continue
		}
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// LabelsValid reports whether labels pass Kubernetes' label rules (metav1 validation's
// ValidateLabels: each key a qualified name with an optional DNS subdomain prefix, each value
// empty or a qualified name of at most 63 characters). It answers without regular
// expressions and may answer false for labels that are valid; a caller then validates them
// the usual way, which also gives the messages. FuzzLabelsValid checks it never passes labels
// ValidateLabels refuses.
func LabelsValid(labels map[string]string) bool {
	for k, v := range labels {
		if !QualifiedNameValid(k) || !LabelValueValid(v) {
			return false
		}
	}
	return true
}

// FinalizersValid reports whether finalizers pass apivalidation.ValidateFinalizers: each a
// qualified name, and not both orphan and foregroundDeletion. Like LabelsValid it answers
// without regular expressions (an object may carry thousands of finalizers) and may answer
// false for valid ones; FuzzFinalizersValid checks it never passes finalizers that fail.
func FinalizersValid(finalizers []string) bool {
	orphan, foreground := false, false
	for _, f := range finalizers {
		if !QualifiedNameValid(f) {
			return false
		}
		orphan = orphan || f == metav1.FinalizerOrphanDependents
		foreground = foreground || f == metav1.FinalizerDeleteDependents
	}
	return !(orphan && foreground)
}

// QualifiedNameValid reports whether s is a qualified name (a label or annotation key): a name
// part with an optional DNS subdomain prefix and '/'. Like LabelsValid it answers without
// regular expressions and may answer false for a valid key; FuzzLabelsValid covers it.
func QualifiedNameValid(s string) bool {
	name := s
	if i := strings.IndexByte(s, '/'); i >= 0 {
		if !isDNS1123Subdomain(s[:i]) {
			return false
		}
		name = s[i+1:]
	}
	return name != "" && isQualifiedNamePart(name)
}

// LabelValueValid reports whether s is a valid label value: empty, or at most 63 letters,
// digits, '-', '_' and '.', beginning and ending with a letter or digit.
func LabelValueValid(s string) bool { return s == "" || isQualifiedNamePart(s) }

// DNSLabelValid reports whether s is an RFC 1123 label (a namespace's name): at most 63
// lower-case letters, digits and '-', beginning and ending with a letter or digit.
func DNSLabelValid(s string) bool {
	return len(s) <= 63 && !strings.Contains(s, ".") && isDNS1123Subdomain(s)
}

// isQualifiedNamePart reports whether s is 1 to 63 letters, digits, '-', '_' or '.',
// beginning and ending with a letter or digit.
func isQualifiedNamePart(s string) bool {
	if len(s) == 0 || len(s) > 63 || !isAlnum(s[0]) || !isAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isAlnum(c) && c != '-' && c != '_' && c != '.' {
			return false
		}
	}
	return true
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
