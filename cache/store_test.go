package cache_test

import (
	"testing"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/cache/cachetest"
)

func TestConformance(t *testing.T) {
	cachetest.RunConformance(t, func(t *testing.T, cfg cache.Config) cache.Interface {
		s := cache.New(cfg)
		t.Cleanup(s.Close)
		return s
	})
}
