package kinds

import apivalidation "k8s.io/apimachinery/pkg/api/validation"

// NameIsDNSSubdomain is apivalidation.NameIsDNSSubdomain, the rule of most kinds' names (and
// of Event names): the same messages for the same name. The names that pass, nearly all of
// them, are checked by a loop instead of its regular expression, which was the largest part of
// validating an object's metadata on every write. FuzzNameIsDNSSubdomain checks that the loop
// passes no name the expression refuses.
func NameIsDNSSubdomain(name string, prefix bool) []string {
	if !prefix && isDNS1123Subdomain(name) {
		return nil
	}
	return apivalidation.NameIsDNSSubdomain(name, prefix)
}

// isDNS1123Subdomain reports whether s is an RFC 1123 subdomain as Kubernetes defines it: at
// most 253 characters, dot-separated labels of lower-case letters, digits and '-', each
// beginning and ending with a letter or digit.
func isDNS1123Subdomain(s string) bool {
	if len(s) == 0 || len(s) > 253 {
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
