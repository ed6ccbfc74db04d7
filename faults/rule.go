package faults

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/opemu/opemu/cache"
)

// Verbs a Fault can match, as RBAC names them.
const (
	VerbGet              = "get"
	VerbList             = "list"
	VerbWatch            = "watch"
	VerbCreate           = "create"
	VerbUpdate           = "update"
	VerbPatch            = "patch"
	VerbDelete           = "delete"
	VerbDeleteCollection = "deletecollection"
)

// Phases of a Fault, in status.phase.
const (
	PhaseActive    = "Active"
	PhaseExhausted = "Exhausted"
	PhaseExpired   = "Expired"
	PhaseInvalid   = "Invalid"
)

// rule is one Fault as the engine applies it. Rules are immutable once published; what changes
// (the counts) lives in the counter shared by every rule made from the same Fault (by uid).
type rule struct {
	name, uid  string
	key        cache.Key
	generation int64

	match       match
	status      int // 0: no error
	message     string
	retryAfter  int
	delay       time.Duration
	watch       *WatchAction
	probability float64
	every       int64
	count       int64     // 0: unlimited
	expiry      time.Time // zero: never
	// invalid, when set, says why the Fault cannot be applied; the rule matches nothing.
	invalid string
	// stored is the status the Fault had when the rule was made.
	stored status

	c *counter
}

// match is spec.match: a nil field matches anything.
type match struct {
	verbs                                                 []string
	group, resource, subresource, namespace, name, prefix *string
}

// counter is what a Fault has done, shared across its rules' rebuilds.
type counter struct {
	mu       sync.Mutex
	seen     int64 // matching requests considered, for spec.every
	injected int64 // faults injected, including those counted in status before this run saw it
	reserved int64 // watch faults armed and not yet effected (they count against spec.count)
	last     time.Time
}

// spec is the JSON shape of a Fault's spec (the CRD's schema has already checked types).
type spec struct {
	Match struct {
		Verbs           []string `json:"verbs"`
		Group           *string  `json:"group"`
		Resource        *string  `json:"resource"`
		Subresource     *string  `json:"subresource"`
		Namespace       *string  `json:"namespace"`
		Name            *string  `json:"name"`
		UserAgentPrefix *string  `json:"userAgentPrefix"`
	} `json:"match"`
	Action struct {
		Status            int    `json:"status"`
		Message           string `json:"message"`
		RetryAfterSeconds *int   `json:"retryAfterSeconds"`
		Delay             string `json:"delay"`
		Watch             *struct {
			CloseAfter string `json:"closeAfter"`
			Expire     bool   `json:"expire"`
		} `json:"watch"`
	} `json:"action"`
	Probability  *float64 `json:"probability"`
	Every        int64    `json:"every"`
	Count        int64    `json:"count"`
	ExpiresAfter string   `json:"expiresAfter"`
	ExpiresAt    string   `json:"expiresAt"`
}

// status is the JSON shape of a Fault's status.
type status struct {
	// ObservedGeneration is the generation of the spec the engine applies.
	ObservedGeneration int64  `json:"observedGeneration,omitempty"`
	Injected           int64  `json:"injected"`
	Phase              string `json:"phase,omitempty"`
	Message            string `json:"message,omitempty"`
	LastInjectionTime  string `json:"lastInjectionTime,omitempty"`
}

// object is the part of a stored Fault the engine reads.
type object struct {
	Metadata struct {
		Name              string `json:"name"`
		UID               string `json:"uid"`
		CreationTimestamp string `json:"creationTimestamp"`
	} `json:"metadata"`
	Spec   spec   `json:"spec"`
	Status status `json:"status"`
}

// newRule reads a stored Fault. A Fault the engine cannot apply gives a rule with invalid set.
func newRule(o *cache.Object) (*rule, status) {
	var obj object
	if err := json.Unmarshal(o.Raw(), &obj); err != nil {
		return &rule{name: o.Key().Name, uid: o.UID(), key: o.Key(), generation: o.Generation(), invalid: "the Fault does not decode: " + err.Error()}, status{}
	}
	r := &rule{name: obj.Metadata.Name, uid: obj.Metadata.UID, key: o.Key(), generation: o.Generation(), stored: obj.Status}
	if err := r.fill(obj); err != nil {
		r.invalid = err.Error()
	}
	return r, obj.Status
}

func (r *rule) fill(obj object) error {
	s := obj.Spec
	m := s.Match
	r.match = match{verbs: m.Verbs, group: m.Group, resource: m.Resource, subresource: m.Subresource,
		namespace: m.Namespace, name: m.Name, prefix: m.UserAgentPrefix}
	a := s.Action
	r.status, r.message = a.Status, a.Message
	switch a.Status {
	case 0, 409, 410, 429, 500, 503, 504:
	default:
		return fmt.Errorf("spec.action.status %d is not one of 409, 410, 429, 500, 503, 504", a.Status)
	}
	if a.RetryAfterSeconds != nil {
		r.retryAfter = *a.RetryAfterSeconds
	} else if a.Status == 429 || a.Status == 503 {
		r.retryAfter = 1
	}
	var err error
	if r.delay, err = duration("spec.action.delay", a.Delay); err != nil {
		return err
	}
	if w := a.Watch; w != nil {
		after, err := duration("spec.action.watch.closeAfter", w.CloseAfter)
		if err != nil {
			return err
		}
		r.watch = &WatchAction{CloseAfter: after, Expire: w.Expire}
	}
	if r.status == 0 && r.delay == 0 && r.watch == nil {
		return errors.New("spec.action needs a status, a delay or a watch action")
	}
	r.probability = 1
	if s.Probability != nil {
		r.probability = *s.Probability
	}
	r.every = max(s.Every, 1)
	r.count = s.Count
	if s.ExpiresAt != "" {
		t, err := time.Parse(time.RFC3339, s.ExpiresAt)
		if err != nil {
			return fmt.Errorf("spec.expiresAt %q is not an RFC 3339 time", s.ExpiresAt)
		}
		r.expiry = t
	}
	if s.ExpiresAfter != "" {
		d, err := duration("spec.expiresAfter", s.ExpiresAfter)
		if err != nil {
			return err
		}
		created, err := time.Parse(time.RFC3339, obj.Metadata.CreationTimestamp)
		if err != nil {
			return fmt.Errorf("metadata.creationTimestamp %q is not an RFC 3339 time", obj.Metadata.CreationTimestamp)
		}
		if at := created.Add(d); r.expiry.IsZero() || at.Before(r.expiry) {
			r.expiry = at
		}
	}
	return nil
}

func duration(field, v string) (time.Duration, error) {
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s %q is not a duration like 300ms or 2s", field, v)
	}
	return d, nil
}

// matches reports whether r applies to req, and has an effect on it: a Fault that only ends
// watches does not match other requests.
func (r *rule) matches(req Request) bool {
	if r.invalid != "" {
		return false
	}
	watching := req.Verb == VerbWatch
	if r.status == 0 && r.delay == 0 && !watching {
		return false
	}
	m := r.match
	if len(m.verbs) > 0 && !contains(m.verbs, req.Verb) {
		return false
	}
	if !m.matchesResource(req) {
		return false
	}
	return eq(m.subresource, req.Subresource) && eq(m.namespace, req.Namespace) && eq(m.name, req.Name) &&
		(m.prefix == nil || strings.HasPrefix(req.UserAgent, *m.prefix))
}

// matchesResource matches group and resource: those of the request, or for a request over
// several resources (the SSE stream) any of them (nil: every resource).
func (m match) matchesResource(req Request) bool {
	if m.group == nil && m.resource == nil {
		return true
	}
	if req.Resource != "" {
		return eq(m.group, req.Group) && eq(m.resource, req.Resource)
	}
	if req.Resources == nil {
		return true
	}
	for _, gr := range req.Resources {
		if eq(m.group, gr.Group) && eq(m.resource, gr.Resource) {
			return true
		}
	}
	return false
}

func eq(want *string, got string) bool { return want == nil || *want == got }

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// phase is the Fault's phase at now.
func (r *rule) phase(injected int64, now time.Time) string {
	switch {
	case r.invalid != "":
		return PhaseInvalid
	case r.count > 0 && injected >= r.count:
		return PhaseExhausted
	case !r.expiry.IsZero() && !now.Before(r.expiry):
		return PhaseExpired
	}
	return PhaseActive
}
