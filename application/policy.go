package application

import (
	"context"
	"fmt"
	"strings"

	"github.com/distribution/reference"
	"github.com/opemu/opemu/webhooks"
)

// ImagePolicy is the security policy: images come from allowed registries and are not blocked
// base images. References are parsed and normalised as Docker does (nginx means
// docker.io/library/nginx:latest).
type ImagePolicy struct {
	allowed    map[string]bool // normalised registries; empty = any
	allowedRaw []string
	blocked    map[string]string // normalised repository → the entry as configured
	// verdicts remembers recent judgements (policy_fast.go).
	verdicts verdicts
}

var _ webhooks.Handler = (*ImagePolicy)(nil)

// NewImagePolicy normalises the allowed registries and the blocked images.
func NewImagePolicy(allowedRegistries, blockedImages []string) (*ImagePolicy, error) {
	p := &ImagePolicy{allowed: map[string]bool{}, blocked: map[string]string{}}
	for _, r := range allowedRegistries {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		named, err := reference.ParseNormalizedNamed(r + "/x")
		if err != nil {
			return nil, fmt.Errorf("webhooks: allowed registry %q: %w", r, err)
		}
		p.allowed[reference.Domain(named)] = true
		p.allowedRaw = append(p.allowedRaw, r)
	}
	for _, b := range blockedImages {
		b = strings.TrimSpace(b)
		if b == "" {
			continue
		}
		named, err := reference.ParseNormalizedNamed(b)
		if err != nil {
			return nil, fmt.Errorf("webhooks: blocked image %q: %w", b, err)
		}
		p.blocked[named.Name()] = b
	}
	return p, nil
}

// Handle judges spec.image.
func (p *ImagePolicy) Handle(_ context.Context, req *webhooks.Request) webhooks.Response {
	spec, _ := req.Object["spec"].(map[string]any)
	image, _ := spec["image"].(string)
	if image == "" {
		return webhooks.Allowed() // the validator requires an image
	}
	return p.Check(image)
}

// Check judges one image reference.
func (p *ImagePolicy) Check(image string) webhooks.Response {
	denial, seen := p.verdicts.get(image)
	if !seen {
		denial = p.judge(image)
		p.verdicts.put(image, denial)
	}
	if denial != "" {
		return webhooks.Denied(denial)
	}
	return webhooks.Allowed()
}

// judge returns why image is denied, or "" when it is allowed.
func (p *ImagePolicy) judge(image string) string {
	named, err := reference.ParseNormalizedNamed(image)
	if err != nil {
		return fmt.Sprintf("invalid image reference %q: %v", image, err)
	}
	if domain := reference.Domain(named); len(p.allowed) > 0 && !p.allowed[domain] {
		return fmt.Sprintf("Registry '%s' is not allowed. Allowed registries: %s", domain, strings.Join(p.allowedRaw, ", "))
	}
	if entry, ok := p.blocked[named.Name()]; ok {
		return fmt.Sprintf("Base image '%s' is not allowed. Use distroless or specific application images.", entry)
	}
	return ""
}
