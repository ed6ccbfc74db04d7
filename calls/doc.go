// Package calls is the record of API calls (SPEC §21): every request the server answered and
// every call opemu's own components made through registry.Client, kept in a bounded ring
// (CALL_HISTORY), read back with a Filter, streamed to subscribers, written as kube-apiserver's
// audit log (audit.go), and turned into the least-privilege RBAC rules that allow what one user
// did (roles.go).
//
// A Call is a fixed-size value whose strings share the request's memory: recording one copies
// it into the ring's slot and encodes nothing; selectors and the like are parsed from its
// RequestURI only when read.
//
// Non-goals: request and response bodies (the audit log's Request level takes the body from
// the request, not from the ring), persistence beyond the audit log.
//
// A Record is safe for concurrent use; a nil *Record records nothing.
package calls
