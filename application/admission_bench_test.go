package application_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/opemu/opemu/application"
	"github.com/opemu/opemu/webhooks"
)

func BenchmarkAdmissionChain(b *testing.B) {
	c, err := application.NewChain(application.ChainConfig{AllowedRegistries: []string{"docker.io", "gcr.io"}, BlockedImages: []string{"ubuntu", "debian", "alpine"}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		req := appRequest(webhooks.Create, map[string]any{"replicas": json.Number("3"), "image": "nginx:1.27"})
		if _, err := c.Mutate(ctx, req); err != nil {
			b.Fatal(err)
		}
		if res := c.Validate(ctx, req); !res.Allowed {
			b.Fatal(res.Result)
		}
	}
}
