package application

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/opemu/opemu/webhooks"
)

// ChainConfig configures the Application admission chain.
type ChainConfig struct {
	// AllowedRegistries images may come from (after Docker normalisation); empty means any.
	AllowedRegistries []string
	// BlockedImages are repositories denied at any tag or digest; empty means none.
	BlockedImages []string
	// Recorder observes every handler call; nil records nothing.
	Recorder webhooks.Recorder
}

// NewChain returns the chain the server runs on every Application write and serves
// at /mutate and /validate: the defaulter (mutating), then the validator and the security
// policy (validating).
func NewChain(cfg ChainConfig) (*webhooks.Chain, error) {
	policy, err := NewImagePolicy(cfg.AllowedRegistries, cfg.BlockedImages)
	if err != nil {
		return nil, err
	}
	return &webhooks.Chain{
		Mutating: []webhooks.Named{{Name: "defaulter", Handler: defaulter{}, Matches: judged}},
		Validating: []webhooks.Named{
			{Name: "validator", Handler: webhooks.HandlerFunc(validateApplication), Matches: judged},
			{Name: "security-policy", Handler: policy, Matches: judged},
		},
		Recorder: cfg.Recorder,
	}, nil
}

// judged is what the Application's handlers match: CREATE and UPDATE of
// cloudnative.elide.dev applications (the main resource or /scale); everything else is
// admitted unchanged.
func judged(req *webhooks.Request) bool {
	return req.Resource.Group == Resource.Group && req.Resource.Resource == Resource.Resource &&
		(req.Operation == webhooks.Create || req.Operation == webhooks.Update) && req.SubResource != "status"
}

const (
	managedByLabel   = "app.kubernetes.io/managed-by"
	managedByValue   = "elide-operator"
	mutatedAnnotaton = "elide.dev/webhook-mutated"
)

// defaultApplication sets spec.strategy, the managed-by label and the mutated annotation.
// It is idempotent: an object already defaulted gets no patch.
func defaultApplication(_ context.Context, req *webhooks.Request) webhooks.Response {
	var ops []webhooks.PatchOperation
	obj := req.Object
	spec, specOK := obj["spec"].(map[string]any)
	if !specOK && obj["spec"] == nil {
		ops = append(ops, webhooks.PatchOperation{Op: "add", Path: "/spec", Value: map[string]any{"strategy": "RollingUpdate"}})
	} else if specOK {
		if s, _ := spec["strategy"].(string); s == "" {
			ops = append(ops, webhooks.PatchOperation{Op: "add", Path: "/spec/strategy", Value: "RollingUpdate"})
		}
	}
	md, mdOK := obj["metadata"].(map[string]any)
	if !mdOK {
		ops = append(ops, webhooks.PatchOperation{Op: "add", Path: "/metadata", Value: map[string]any{
			"labels":      map[string]any{managedByLabel: managedByValue},
			"annotations": map[string]any{mutatedAnnotaton: "true"},
		}})
		return webhooks.Patched(ops...)
	}
	ops = append(ops, setMapEntry(md, "labels", managedByLabel, managedByValue)...)
	ops = append(ops, setMapEntry(md, "annotations", mutatedAnnotaton, "true")...)
	if len(ops) == 0 {
		return webhooks.Allowed()
	}
	return webhooks.Patched(ops...)
}

// defaulter is the mutating handler: defaultApplication, and for the write path the same
// changes made in place (HandleInPlace, admission_fast.go).
type defaulter struct{}

var _ webhooks.InPlace = defaulter{}

func (defaulter) Handle(ctx context.Context, req *webhooks.Request) webhooks.Response {
	return defaultApplication(ctx, req)
}

// setMapEntry returns the ops that make metadata[field][key] == value.
func setMapEntry(md map[string]any, field, key, value string) []webhooks.PatchOperation {
	m, ok := md[field].(map[string]any)
	if !ok {
		return []webhooks.PatchOperation{{Op: "add", Path: "/metadata/" + field, Value: map[string]any{key: value}}}
	}
	if v, _ := m[key].(string); v == value {
		return nil
	}
	return []webhooks.PatchOperation{{Op: "add", Path: "/metadata/" + field + "/" + escapePointer(key), Value: value}}
}

// escapePointer escapes a JSON Pointer token (RFC 6901).
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// validateApplication checks replicas and image, and warns about missing limits and the
// latest tag.
func validateApplication(_ context.Context, req *webhooks.Request) webhooks.Response {
	spec, _ := req.Object["spec"].(map[string]any)
	replicas, ok := asInt(spec["replicas"])
	switch {
	case !ok:
		return webhooks.Denied("replicas is required and must be an integer")
	case replicas < 0:
		return webhooks.Denied("replicas must be >= 0")
	case replicas > 100:
		return webhooks.Denied("replicas must be <= 100 (use HPA for higher scale)")
	}
	image, _ := spec["image"].(string)
	if image == "" {
		return webhooks.Denied("image is required")
	}
	var warnings []string
	res, _ := spec["resources"].(map[string]any)
	if limits, ok := res["limits"].(map[string]any); !ok || len(limits) == 0 {
		warnings = append(warnings, "no resource limits set (spec.resources.limits); set cpu and memory limits for production")
	}
	if usesLatest(image) {
		warnings = append(warnings, fmt.Sprintf("image '%s' uses the latest tag; pin a specific version", image))
	}
	return webhooks.Allowed(warnings...)
}

// usesLatest reports an image with the tag latest or no tag and no digest.
func usesLatest(image string) bool {
	if strings.Contains(image, "@") {
		return false
	}
	last := image[strings.LastIndex(image, "/")+1:]
	i := strings.LastIndex(last, ":")
	return i < 0 || last[i+1:] == "latest"
}

// asInt reads an integer from a decoded JSON number of any representation.
func asInt(v any) (int64, bool) {
	switch n := v.(type) {
	case json.Number:
		i, err := n.Int64()
		return i, err == nil
	case float64:
		i := int64(n)
		return i, float64(i) == n
	case int64:
		return n, true
	case int:
		return int64(n), true
	}
	return 0, false
}
