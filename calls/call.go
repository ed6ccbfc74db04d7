package calls

import (
	"net/url"
	"strings"
	"time"
)

// Call is one API call: who made it, what it asked, what it got, and how long it took. Its
// strings are shared with the request that made it, never copied.
type Call struct {
	// ID numbers the calls of one Record from 1, in the order they ended.
	ID uint64
	// Start is when the request arrived; Latency how long it took to answer (for a watch, how
	// long it stayed open).
	Start   time.Time
	Latency time.Duration

	// Who: the authenticated user (empty when the server authenticates nobody), its groups,
	// the User-Agent header and the fieldManager query parameter of a write.
	User         string
	UID          string
	Groups       []string
	UserAgent    string
	FieldManager string
	// SourceIP is the client's address (host:port as net/http reports it); empty for an
	// in-process call.
	SourceIP string

	// What: the Kubernetes verb (get, list, watch, create, update, patch, delete,
	// deletecollection), or the HTTP method in lower case for a non-resource request.
	Verb        string
	APIGroup    string
	APIVersion  string
	Resource    string
	Subresource string
	Namespace   string
	Name        string
	// RequestURI is the path and query as sent; selectors and resourceVersion are read from it
	// (LabelSelector, FieldSelector, QueryResourceVersion). For an in-process call it is empty.
	RequestURI string

	// What it got: the HTTP status code, the Status reason of a failure, and the
	// resourceVersion the call produced (a write) or read (a get, a list). Zero when none.
	Code            int32
	Reason          string
	ResourceVersion uint64
	// WatchEvents is how many events a watch carried.
	WatchEvents int64
	// Open is set on a watch's call while the watch is open: it is recorded when its stream
	// begins (Latency zero) and again, closed, with the same ID when it ends (Record.Finish).
	Open bool

	// Internal marks a call of opemu's own components (the controllers, the event recorder,
	// the lease lock, hooks' clients): Component names the one that made it (its field manager).
	Internal  bool
	Component string
	// Reconcile is the key ("resource/namespace/name") a built-in controller or hook was
	// reconciling when it made the call, set exactly (WithReconcile); empty otherwise.
	Reconcile string
	// Forbidden is set when the authorizer refused the call (its code is 403).
	Forbidden bool

	// Body is the request body, and BodyType its media type, passed to the record's Sink (the
	// audit log's level Request); the ring never keeps them.
	Body     []byte
	BodyType string
	// Annotations are the audit annotations admission made for the call (AddAnnotations):
	// a ValidatingAdmissionPolicy's auditAnnotations as "<policy>/<key>", and the failures of
	// its Audit action as "validation.policy.admission.k8s.io/validation_failure". Passed to
	// the record's Sink (the audit log's Events carry them); the ring never keeps them.
	Annotations map[string]string
}

// IsResource reports whether c was a call about a resource (not /healthz, /version, ...).
func (c *Call) IsResource() bool { return c.Resource != "" }

// IsWrite reports whether c's verb changes something.
func (c *Call) IsWrite() bool {
	switch c.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// ServiceAccount returns the namespace and name of the ServiceAccount c's user is, if it is one
// ("system:serviceaccount:<namespace>:<name>").
func (c *Call) ServiceAccount() (namespace, name string, ok bool) {
	rest, ok := strings.CutPrefix(c.User, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	namespace, name, ok = strings.Cut(rest, ":")
	return namespace, name, ok && namespace != "" && name != ""
}

// Path is RequestURI without its query.
func (c *Call) Path() string {
	p, _, _ := strings.Cut(c.RequestURI, "?")
	return p
}

// query returns the value of name in RequestURI's query ("" when absent).
func (c *Call) query(name string) string {
	_, q, ok := strings.Cut(c.RequestURI, "?")
	if !ok {
		return ""
	}
	v, err := url.ParseQuery(q)
	if err != nil {
		return ""
	}
	return v.Get(name)
}

// LabelSelector is the call's labelSelector query parameter.
func (c *Call) LabelSelector() string { return c.query("labelSelector") }

// FieldSelector is the call's fieldSelector query parameter.
func (c *Call) FieldSelector() string { return c.query("fieldSelector") }

// QueryResourceVersion is the call's resourceVersion query parameter.
func (c *Call) QueryResourceVersion() string { return c.query("resourceVersion") }

// Actor names who made c for display and filtering: its user, else its component, else
// its user agent.
func (c *Call) Actor() string {
	switch {
	case c.User != "":
		return c.User
	case c.Component != "":
		return c.Component
	}
	return c.UserAgent
}
