package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// Recorder observes handler calls (*metrics.Registry implements it).
type Recorder interface {
	ObserveWebhook(webhook, operation string, allowed bool, d time.Duration)
}

// Named is a handler with the name its metrics carry.
type Named struct {
	Name    string
	Handler Handler
}

// Chain runs mutating handlers, then validating handlers, as an API server does.
type Chain struct {
	Mutating   []Named
	Validating []Named
	// Recorder may be nil.
	Recorder Recorder
}

func (c *Chain) run(ctx context.Context, h Named, req *Request) Response {
	start := time.Now()
	res := h.Handler.Handle(ctx, req)
	if c.Recorder != nil {
		c.Recorder.ObserveWebhook(h.Name, string(req.Operation), res.Allowed, time.Since(start))
	}
	return res
}

// Mutate runs every mutating handler in order. Each handler's patch is applied to req.Object
// before the next runs, so req.Object ends mutated. It returns the combined patch, every
// warning, and the first denial, if any (Allowed false).
func (c *Chain) Mutate(ctx context.Context, req *Request) (Response, error) {
	out := Response{Allowed: true}
	for _, h := range c.Mutating {
		res := c.run(ctx, h, req)
		out.Warnings = append(out.Warnings, res.Warnings...)
		if !res.Allowed {
			out.Allowed, out.Result = false, res.Result
			return out, nil
		}
		if len(res.Patch) == 0 {
			continue
		}
		obj, err := applyPatch(req.Object, res.Patch)
		if err != nil {
			return Response{}, fmt.Errorf("webhooks: applying the patch of %s: %w", h.Name, err)
		}
		req.Object = obj
		out.Patch = append(out.Patch, res.Patch...)
	}
	return out, nil
}

// Validate runs the validating handlers until one denies; warnings accumulate.
func (c *Chain) Validate(ctx context.Context, req *Request) Response {
	out := Response{Allowed: true}
	for _, h := range c.Validating {
		res := c.run(ctx, h, req)
		out.Warnings = append(out.Warnings, res.Warnings...)
		if !res.Allowed {
			out.Allowed, out.Result = false, res.Result
			return out
		}
	}
	return out
}

// applyPatch applies ops to obj and returns the result, replacing obj's contents in place so
// callers holding obj see the mutation.
func applyPatch(obj map[string]any, ops []PatchOperation) (map[string]any, error) {
	doc, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	p, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	patch, err := jsonpatch.DecodePatch(p)
	if err != nil {
		return nil, err
	}
	out, err := patch.Apply(doc)
	if err != nil {
		return nil, err
	}
	var next map[string]any
	dec := json.NewDecoder(bytesReader(out))
	dec.UseNumber()
	if err := dec.Decode(&next); err != nil {
		return nil, err
	}
	for k := range obj {
		delete(obj, k)
	}
	for k, v := range next {
		obj[k] = v
	}
	return obj, nil
}
