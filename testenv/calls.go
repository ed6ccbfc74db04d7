package testenv

import (
	"fmt"
	"strings"
	"testing"

	"github.com/opemu/opemu/calls"
)

// The record of calls (SPEC §21) for a suite: what its operator asked of the API, to assert
// with, and the least-privilege Role that allows it, to compare with its RBAC markers.

// Calls returns the calls the environment recorded that f matches, oldest first (at most the
// record's size: Options.Server.CallHistory, calls.DefaultSize by default).
func (e *Environment) Calls(f calls.Filter) []calls.Call {
	return e.app.Calls().List(f)
}

// Roles returns the Roles and ClusterRole that allow exactly what user was seen doing
// (Roles.YAML is kubectl-appliable; Roles.Namespace holds the rules).
func (e *Environment) Roles(user string, o calls.RoleOptions) calls.Roles {
	return calls.Generate(user, e.app.Calls().List(calls.Filter{User: user}), o)
}

// Describe is a call as the assertion helpers spell it: "verb resource[/sub] [namespace/]name"
// ("list deployments default/", "update memcacheds/status default/memcached-sample"), the
// resource prefixed by its group when it has one ("apps/deployments").
func Describe(c calls.Call) string {
	res := c.Resource
	if c.APIGroup != "" {
		res = c.APIGroup + "/" + res
	}
	if c.Subresource != "" {
		res += "/" + c.Subresource
	}
	target := c.Name
	if c.Namespace != "" {
		target = c.Namespace + "/" + c.Name
	}
	return strings.TrimSpace(c.Verb + " " + res + " " + target)
}

// NoWrites fails t, listing them, when cs holds a call that changes something (create,
// update, patch, delete, deletecollection); it reports whether there was none.
func NoWrites(t testing.TB, cs []calls.Call) bool {
	t.Helper()
	var writes []string
	for _, c := range cs {
		if c.IsWrite() {
			writes = append(writes, fmt.Sprintf("%s (%d)", Describe(c), c.Code))
		}
	}
	if len(writes) > 0 {
		t.Errorf("expected no writes, got %d:\n  %s", len(writes), strings.Join(writes, "\n  "))
		return false
	}
	return true
}

// ExactCalls fails t unless cs, described by Describe, are exactly want in order; it
// reports whether they were.
func ExactCalls(t testing.TB, cs []calls.Call, want ...string) bool {
	t.Helper()
	got := make([]string, len(cs))
	for i, c := range cs {
		got[i] = Describe(c)
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("calls differ:\n got:\n  %s\n want:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		return false
	}
	return true
}
