package application_test

import (
	"testing"

	"github.com/opemu/opemu/application"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// FuzzImagePolicyMemory: a verdict the policy remembers is the verdict a policy that never saw
// the image gives (its first check of an image is judged, not remembered).
func FuzzImagePolicyMemory(f *testing.F) {
	for _, seed := range []string{"nginx", "nginx:1.27", "docker.io/library/ubuntu:22.04", "quay.io/x/y:1", "UPPER", ""} {
		f.Add(seed)
	}
	allowed, blocked := []string{"docker.io", "gcr.io"}, []string{"ubuntu", "alpine"}
	remembering, err := application.NewImagePolicy(allowed, blocked)
	require.NoError(f, err)
	f.Fuzz(func(t *testing.T, image string) {
		fresh, err := application.NewImagePolicy(allowed, blocked)
		require.NoError(t, err)
		want := fresh.Check(image)
		assert.Equal(t, want, remembering.Check(image), "first check of %q", image)
		assert.Equal(t, want, remembering.Check(image), "remembered verdict of %q", image)
	})
}
