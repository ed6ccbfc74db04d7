package webhooks_test

import (
	"context"
	"testing"

	"github.com/opemu/opemu/webhooks"
	"github.com/stretchr/testify/assert"
)

type fixed struct{ m, v []webhooks.Named }

func (f fixed) Handlers() (mutating, validating []webhooks.Named) { return f.m, f.v }

// TestConfigsOrder: Configs runs each Configured's handlers after the previous one's (the
// admission policies before the webhooks, as kube-apiserver orders them), and a denial stops
// the ones after it.
func TestConfigsOrder(t *testing.T) {
	var calls []string
	h := func(name string, allow bool) webhooks.Named {
		return webhooks.Named{Name: name, Handler: webhooks.HandlerFunc(func(context.Context, *webhooks.Request) webhooks.Response {
			calls = append(calls, name)
			return webhooks.Response{Allowed: allow}
		})}
	}
	policies := fixed{m: []webhooks.Named{h("map", true)}, v: []webhooks.Named{h("vap", false)}}
	hooks := fixed{m: []webhooks.Named{h("mutating-webhook", true)}, v: []webhooks.Named{h("validating-webhook", true)}}
	chain := &webhooks.Chain{Configured: webhooks.Configs{policies, fixed{}, hooks}}
	req := &webhooks.Request{Operation: webhooks.Create, Object: map[string]any{}}
	res, err := chain.Mutate(context.Background(), req)
	assert.NoError(t, err)
	assert.True(t, res.Allowed)
	assert.False(t, chain.Validate(context.Background(), req).Allowed)
	assert.Equal(t, []string{"map", "mutating-webhook", "vap"}, calls)
	assert.True(t, chain.HasConfigured())
	assert.False(t, (&webhooks.Chain{Configured: webhooks.Configs{fixed{}, fixed{}}}).HasConfigured())
}
