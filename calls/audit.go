package calls

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"time"

	"github.com/google/uuid"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/audit/policy"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// The audit log (AUDIT_LOG_PATH): every call as kube-apiserver's --audit-log-path writes it,
// audit.k8s.io/v1 Events as JSON lines, at the level kube-apiserver's --audit-policy-file
// gives it (read and evaluated by k8s.io/apiserver's policy code). Levels above Request are
// written as Request (opemu keeps no response bodies). A call's line is written when it ends:
// the stage ResponseComplete, and for a watch ResponseStarted (stamped when it began) just
// before it; RequestReceived, when the policy does not omit it, comes first.

// Audit writes the audit log. Safe for concurrent use.
type Audit struct {
	eval audit.PolicyRuleEvaluator // nil: every call at level Metadata

	mu  sync.Mutex
	out io.Writer
	f   *os.File // nil for standard output
	buf []byte
	// open are the auditIDs of the open watches, by their Call (the same until it ends).
	open map[*Call]types.UID
}

// OpenAudit opens the audit log at path ("-": standard output), appending, with the policy
// read from policyFile (empty: every call at level Metadata, stages all but RequestReceived).
func OpenAudit(path, policyFile string) (*Audit, error) {
	a := &Audit{}
	if policyFile != "" {
		p, err := policy.LoadPolicyFromFile(policyFile)
		if err != nil {
			return nil, fmt.Errorf("audit policy: %w", err)
		}
		a.eval = policy.NewPolicyRuleEvaluator(p)
	}
	if path == "-" {
		a.out = os.Stdout
		return a, nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	a.out, a.f = f, f
	return a, nil
}

// Close closes the log file.
func (a *Audit) Close() error {
	if a == nil || a.f == nil {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.f.Close()
}

// config is the level and omitted stages of c by the policy.
func (a *Audit) config(c *Call) audit.RequestAuditConfig {
	if a.eval == nil {
		return audit.RequestAuditConfig{Level: auditinternal.LevelMetadata, OmitStages: []auditinternal.Stage{auditinternal.StageRequestReceived}}
	}
	return a.eval.EvaluatePolicyRule(attributes(c))
}

// attributes are c's authorization attributes, which the policy's rules match.
func attributes(c *Call) authorizer.Attributes {
	return authorizer.AttributesRecord{
		User: &user.DefaultInfo{Name: c.User, UID: c.UID, Groups: c.Groups}, Verb: c.Verb, Namespace: c.Namespace,
		APIGroup: c.APIGroup, APIVersion: c.APIVersion, Resource: c.Resource, Subresource: c.Subresource, Name: c.Name,
		ResourceRequest: c.IsResource(), Path: c.Path(),
	}
}

// Write logs c (a Record's Sink). Errors writing are reported on standard error once per
// call, as kube-apiserver's log backend does.
func (a *Audit) Write(c *Call) {
	if c.Internal {
		return // opemu's own components make no HTTP requests
	}
	cfg := a.config(c)
	if cfg.Level == auditinternal.LevelNone {
		return
	}
	ev := Event(c, cfg.Level)
	a.mu.Lock()
	defer a.mu.Unlock()
	// A watch's lines share the auditID given when it opened.
	if c.Open {
		if a.open == nil {
			a.open = map[*Call]types.UID{}
		}
		a.open[c] = ev.AuditID
	} else if id, ok := a.open[c]; ok {
		ev.AuditID = id
		delete(a.open, c)
	}
	write := func(stage auditv1.Stage, at time.Time) {
		for _, s := range cfg.OmitStages {
			if string(s) == string(stage) {
				return
			}
		}
		ev.Stage, ev.StageTimestamp = stage, metav1.NewMicroTime(at)
		b, err := json.Marshal(ev)
		if err == nil {
			a.buf = append(append(a.buf[:0], b...), '\n')
			_, err = a.out.Write(a.buf)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "opemu: writing the audit log: %v\n", err)
		}
	}
	switch {
	case c.Open: // a watch's stream began
		write(auditv1.StageRequestReceived, c.Start)
		write(auditv1.StageResponseStarted, c.Start.Add(c.Latency))
	case c.Verb == "watch" && c.ID != 0: // it ended (Record.Finish)
		write(auditv1.StageResponseComplete, c.Start.Add(c.Latency))
	default:
		write(auditv1.StageRequestReceived, c.Start)
		// Admission's annotations join the event after the stage RequestReceived, as
		// kube-apiserver's admission adds them to its audit context.
		for k, v := range c.Annotations {
			if _, taken := ev.Annotations[k]; !taken {
				ev.Annotations[k] = v
			}
		}
		write(auditv1.StageResponseComplete, c.Start.Add(c.Latency))
	}
}

// Event is c as kube-apiserver's audit.k8s.io/v1 Event at level (Metadata, or Request with
// the request body when c has one), as at its stage RequestReceived (the authorizer's
// annotations, not yet admission's: Write adds c.Annotations for the later stages); its Stage
// is for the caller to set.
func Event(c *Call, level auditinternal.Level) *auditv1.Event {
	ev := &auditv1.Event{
		TypeMeta:                 metav1.TypeMeta{APIVersion: auditv1.SchemeGroupVersion.String(), Kind: "Event"},
		Level:                    auditv1.Level(level),
		AuditID:                  types.UID(uuid.NewString()),
		RequestURI:               c.RequestURI,
		Verb:                     c.Verb,
		User:                     authnUser(c),
		UserAgent:                c.UserAgent,
		ResponseStatus:           &metav1.Status{Code: c.Code},
		RequestReceivedTimestamp: metav1.NewMicroTime(c.Start),
		Annotations:              map[string]string{"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""},
	}
	if level.GreaterOrEqual(auditinternal.LevelMetadata) && c.Code >= 400 {
		ev.ResponseStatus.Status = metav1.StatusFailure
		ev.ResponseStatus.Reason = metav1.StatusReason(c.Reason)
	}
	if c.Forbidden {
		ev.Annotations["authorization.k8s.io/decision"] = "forbid"
	}
	if host, _, err := net.SplitHostPort(c.SourceIP); err == nil {
		ev.SourceIPs = []string{host}
	}
	if c.IsResource() {
		ev.ObjectRef = &auditv1.ObjectReference{Resource: c.Resource, Namespace: c.Namespace, Name: c.Name,
			APIGroup: c.APIGroup, APIVersion: c.APIVersion, Subresource: c.Subresource}
	}
	if level.GreaterOrEqual(auditinternal.LevelRequest) && len(c.Body) > 0 {
		if raw := bodyJSON(c.Body, c.BodyType); raw != nil {
			ev.RequestObject = &runtime.Unknown{Raw: raw, ContentType: runtime.ContentTypeJSON}
		}
	}
	return ev
}

// authnUser is c's user as the audit log names it.
// A call without a user came to a server that authenticates nobody: kube-apiserver's
// anonymous user.
func authnUser(c *Call) authnv1.UserInfo {
	if c.User == "" {
		return authnv1.UserInfo{Username: user.Anonymous, Groups: []string{user.AllUnauthenticated}}
	}
	return authnv1.UserInfo{Username: c.User, UID: c.UID, Groups: c.Groups}
}

// bodyJSON is a request body as JSON, as kube-apiserver's audit log shows the request object:
// JSON as sent, YAML converted, protobuf (built-in kinds) decoded by client-go's scheme. Nil
// when it is none of them.
func bodyJSON(body []byte, mediaType string) []byte {
	switch mediaType {
	case "application/yaml", "application/apply-patch+yaml":
		j, err := yaml.YAMLToJSON(body)
		if err != nil {
			return nil
		}
		return j
	case "application/vnd.kubernetes.protobuf":
		obj, _, err := scheme.Codecs.UniversalDeserializer().Decode(body, nil, nil)
		if err != nil {
			return nil
		}
		j, err := json.Marshal(obj)
		if err != nil {
			return nil
		}
		return j
	}
	if !json.Valid(body) {
		return nil
	}
	return body
}
