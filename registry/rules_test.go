package registry_test

import (
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/registry/registrytest"
)

// TestRules runs the rules of objects over the in-memory store.
func TestRules(t *testing.T) {
	registrytest.RunRules(t, func(t *testing.T) cache.Interface { return cache.New(cache.Config{}) })
}
