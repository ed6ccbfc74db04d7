package calls

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Filter selects calls. A zero field matches every call.
type Filter struct {
	// User matches the call's user, or the component of an internal call.
	User string
	// Agent matches a user agent that begins with it ("memcached-operator" matches
	// "memcached-operator/v0.0.0 (linux/amd64) kubernetes/$Format").
	Agent string
	// Verb is a Kubernetes verb (get, list, watch, create, ...).
	Verb string
	// Resource is a plural ("deployments"), with a subresource ("deployments/status") or
	// prefixed by its group ("apps/deployments").
	Resource  string
	Namespace string
	Name      string
	// Code is the HTTP status code.
	Code int
	// Since keeps calls that arrived at or after it.
	Since time.Time
	// Until keeps calls that arrived before it.
	Until time.Time
	// Reconcile keeps calls made while reconciling this key (Call.Reconcile).
	Reconcile string
	// Internal keeps only opemu's own calls when "true", only the others when "false".
	Internal string
	// Writes keeps only calls that change something.
	Writes bool
	// After keeps calls whose ID is greater.
	After uint64
	// Limit keeps the newest Limit calls (List only); zero means all.
	Limit int
}

// Match reports whether f selects c.
func (f Filter) Match(c *Call) bool {
	switch {
	case f.User != "" && f.User != c.User && !(c.Internal && f.User == c.Component):
		return false
	case f.Agent != "" && !strings.HasPrefix(c.UserAgent, f.Agent):
		return false
	case f.Verb != "" && !strings.EqualFold(f.Verb, c.Verb):
		return false
	case f.Resource != "" && !matchResource(f.Resource, c):
		return false
	case f.Namespace != "" && f.Namespace != c.Namespace:
		return false
	case f.Name != "" && f.Name != c.Name:
		return false
	case f.Code != 0 && int32(f.Code) != c.Code:
		return false
	case !f.Since.IsZero() && c.Start.Before(f.Since):
		return false
	case !f.Until.IsZero() && !c.Start.Before(f.Until):
		return false
	case f.Reconcile != "" && f.Reconcile != c.Reconcile:
		return false
	case f.Internal == "true" && !c.Internal, f.Internal == "false" && c.Internal:
		return false
	case f.Writes && !c.IsWrite():
		return false
	case f.After != 0 && c.ID != 0 && c.ID <= f.After:
		return false
	}
	return true
}

// matchResource matches want ("res", "res/sub", "group/res" or "group/res/sub"; the core
// group is "") against c's resource.
func matchResource(want string, c *Call) bool {
	parts := strings.Split(want, "/")
	switch len(parts) {
	case 1:
		return parts[0] == c.Resource && c.Subresource == ""
	case 2:
		return (parts[0] == c.Resource && parts[1] == c.Subresource) ||
			(parts[0] == c.APIGroup && parts[1] == c.Resource && c.Subresource == "")
	case 3:
		return parts[0] == c.APIGroup && parts[1] == c.Resource && parts[2] == c.Subresource
	}
	return false
}

// ParseFilter reads a Filter from query parameters: user, agent, verb, resource, namespace,
// name, code, since (RFC 3339, or a duration back from now such as 5m), until, reconcile,
// internal, writes, after and limit.
func ParseFilter(q url.Values, now time.Time) (Filter, error) {
	f := Filter{User: q.Get("user"), Agent: q.Get("agent"), Verb: q.Get("verb"), Resource: q.Get("resource"),
		Namespace: q.Get("namespace"), Name: q.Get("name"), Reconcile: q.Get("reconcile"), Internal: q.Get("internal")}
	var err error
	if v := q.Get("code"); v != "" {
		if f.Code, err = strconv.Atoi(v); err != nil || f.Code < 100 || f.Code > 599 {
			return Filter{}, fmt.Errorf("code %q is not an HTTP status code", v)
		}
	}
	for _, p := range []struct {
		name string
		into *time.Time
	}{{"since", &f.Since}, {"until", &f.Until}} {
		if v := q.Get(p.name); v != "" {
			if *p.into, err = parseTime(v, now); err != nil {
				return Filter{}, fmt.Errorf("%s %q: %w", p.name, v, err)
			}
		}
	}
	if v := q.Get("writes"); v != "" {
		if f.Writes, err = strconv.ParseBool(v); err != nil {
			return Filter{}, fmt.Errorf("writes %q is not a boolean", v)
		}
	}
	if v := q.Get("after"); v != "" {
		if f.After, err = strconv.ParseUint(v, 10, 64); err != nil {
			return Filter{}, fmt.Errorf("after %q is not a call ID", v)
		}
	}
	if v := q.Get("limit"); v != "" {
		if f.Limit, err = strconv.Atoi(v); err != nil || f.Limit < 0 {
			return Filter{}, fmt.Errorf("limit %q is not a non-negative integer", v)
		}
	}
	switch f.Internal {
	case "", "true", "false":
	default:
		return Filter{}, fmt.Errorf("internal %q is not true or false", f.Internal)
	}
	return f, nil
}

// parseTime reads an RFC 3339 time, or a duration back from now.
func parseTime(v string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(v); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("a duration back from now must not be negative")
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, v)
	if err != nil {
		return time.Time{}, fmt.Errorf("neither an RFC 3339 time nor a duration")
	}
	return t, nil
}
