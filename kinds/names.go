package kinds

import apivalidation "k8s.io/apimachinery/pkg/api/validation"

// NameIsDNSSubdomain is apivalidation.NameIsDNSSubdomain, the rule of most kinds' names (and
// of Event names): the same messages for the same name. The names that pass, nearly all of
// them, are checked by a loop instead of its regular expression (names_fast.go), which was the largest part of
// validating an object's metadata on every write. FuzzNameIsDNSSubdomain checks that the loop
// passes no name the expression refuses.
func NameIsDNSSubdomain(name string, prefix bool) []string {
	if !prefix && isDNS1123Subdomain(name) {
		return nil
	}
	return apivalidation.NameIsDNSSubdomain(name, prefix)
}
