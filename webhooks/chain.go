package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// Recorder observes handler calls (*metrics.Registry implements it).
type Recorder interface {
	ObserveWebhook(webhook, operation string, allowed bool, d time.Duration)
}

// Named is a handler with the name its metrics carry and the requests it judges.
type Named struct {
	Name    string
	Handler Handler
	// Matches says which requests the handler judges (its rules); nil means every request.
	// A request it does not match is admitted unchanged without calling it or counting it in
	// the metrics, as kube-apiserver skips webhooks whose rules do not match.
	Matches func(req *Request) bool
	// External marks a handler outside opemu (an admission webhook configured in the API):
	// what its patches make is pruned and defaulted again by the write path.
	External bool
}

// Configured is a changing set of handlers that run after a chain's own (the admission
// webhooks configured in the API, package hooks): mutating after Chain.Mutating, validating
// after Chain.Validating.
type Configured interface {
	// Handlers returns the handlers as of now. It is called once per request and must be cheap;
	// the slices are never modified by the caller.
	Handlers() (mutating, validating []Named)
}

// Chain runs mutating handlers, then validating handlers, as an API server does.
type Chain struct {
	Mutating   []Named
	Validating []Named
	// Configured, when set, adds handlers after the chain's own (built-in first, then
	// configured, as kube-apiserver runs its admission plugins before its webhooks).
	Configured Configured
	// Recorder may be nil.
	Recorder Recorder
}

// HasConfigured reports whether Configured holds any handler now: the write path runs
// admission on DELETE and /status writes only then, since no built-in handler judges them.
func (c *Chain) HasConfigured() bool {
	if c == nil || c.Configured == nil {
		return false
	}
	m, v := c.Configured.Handlers()
	return len(m)+len(v) > 0
}

// handlers returns the chain's own handlers followed by the configured ones.
func (c *Chain) handlers(mutating bool) []Named {
	own := c.Validating
	if mutating {
		own = c.Mutating
	}
	if c.Configured == nil {
		return own
	}
	m, v := c.Configured.Handlers()
	more := v
	if mutating {
		more = m
	}
	if len(more) == 0 {
		return own
	}
	return append(append(make([]Named, 0, len(own)+len(more)), own...), more...)
}

func (c *Chain) run(ctx context.Context, h Named, req *Request) Response {
	return c.runWith(ctx, h, req, h.Handler.Handle)
}

// runWith asks h about req through handle (its Handle or HandleInPlace), if h matches req.
func (c *Chain) runWith(ctx context.Context, h Named, req *Request, handle func(context.Context, *Request) Response) Response {
	if h.Matches != nil && !h.Matches(req) {
		return Allowed()
	}
	start := time.Now()
	res := handle(ctx, req)
	if c.Recorder != nil {
		c.Recorder.ObserveWebhook(h.Name, string(req.Operation), res.Allowed, time.Since(start))
	}
	return res
}

// Mutate runs every mutating handler in order. Each handler's patch is applied to req.Object
// before the next runs, so req.Object ends mutated. It returns the combined patch, every
// warning, and the first denial, if any (Allowed false). On DELETE there is no object to
// mutate: handlers are asked (and may deny) but their patches are not applied.
func (c *Chain) Mutate(ctx context.Context, req *Request) (Response, error) {
	return c.mutate(ctx, req, false)
}

// Apply is Mutate for the write path, which needs the mutated object and not the patch: a
// handler that implements InPlace makes its changes to req.Object directly, and the Response
// holds no patch.
func (c *Chain) Apply(ctx context.Context, req *Request) (Response, error) {
	return c.mutate(ctx, req, true)
}

func (c *Chain) mutate(ctx context.Context, req *Request, apply bool) (Response, error) {
	out := Response{Allowed: true}
	for _, h := range c.handlers(true) {
		var res Response
		if ip, ok := h.Handler.(InPlace); ok && apply && req.Operation != Delete {
			res = c.runWith(ctx, h, req, ip.HandleInPlace)
		} else {
			res = c.runWith(ctx, h, req, h.Handler.Handle)
		}
		out.Warnings = append(out.Warnings, res.Warnings...)
		if !res.Allowed {
			out.Allowed, out.Result = false, res.Result
			return out, nil
		}
		if len(res.Patch) == 0 || req.Operation == Delete {
			continue
		}
		obj, err := applyPatch(req.Object, res.Patch)
		if err != nil {
			return Response{}, fmt.Errorf("webhooks: applying the patch of %s: %w", h.Name, err)
		}
		req.Object = obj
		if !apply {
			out.Patch = append(out.Patch, res.Patch...)
		}
		out.External = out.External || h.External
	}
	return out, nil
}

// Validate runs the validating handlers until one denies; warnings accumulate.
func (c *Chain) Validate(ctx context.Context, req *Request) Response {
	out := Response{Allowed: true}
	for _, h := range c.handlers(false) {
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
// callers holding obj see the mutation. An "add" or "replace" of a JSON value into an existing
// object (what the built-in defaulter sends) is applied directly (applyInPlace,
// chain_fast.go); any other patch goes through evanphx/json-patch v4 on the encoded object,
// the library kube-apiserver applies webhooks' patches with (a null value is a value; a test of
// null passes on a null or missing key). The library panics on some operations on the root: an
// error here.
func applyPatch(obj map[string]any, ops []PatchOperation) (_ map[string]any, err error) {
	if done, err := applyInPlace(obj, ops); done {
		return obj, err
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("the JSON Patch cannot be applied: %v", r)
		}
	}()
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

// Configs is several Configured in order, as one: each one's mutating handlers after the
// previous one's, and likewise the validating (kube-apiserver's admission policies before its
// webhooks).
type Configs []Configured

// Handlers concatenates the handlers of every Configured; it allocates only when more than one
// holds handlers.
func (cs Configs) Handlers() (mutating, validating []Named) {
	for _, c := range cs {
		m, v := c.Handlers()
		mutating = concat(mutating, m)
		validating = concat(validating, v)
	}
	return mutating, validating
}

// concat returns a followed by b, sharing whichever is the only non-empty one.
func concat(a, b []Named) []Named {
	switch {
	case len(b) == 0:
		return a
	case len(a) == 0:
		return b
	}
	return append(append(make([]Named, 0, len(a)+len(b)), a...), b...)
}
