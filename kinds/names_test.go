package kinds_test

import (
	"strings"
	"testing"

	"github.com/opemu/opemu/kinds"
	"github.com/stretchr/testify/assert"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
)

func TestNameIsDNSSubdomain(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"a", "app-1", "app.187a6b2c3d", "a.b.c", "0", strings.Repeat("a", 253), strings.Repeat("a", 254),
		"", "-a", "a-", "a..b", ".a", "a.", "A", "a_b", "a.-b", "日本", "a b",
	} {
		for _, prefix := range []bool{false, true} {
			assert.Equal(t, apivalidation.NameIsDNSSubdomain(name, prefix), kinds.NameIsDNSSubdomain(name, prefix), "%q prefix=%v", name, prefix)
		}
	}
}

// FuzzNameIsDNSSubdomain checks that the fast rule gives apivalidation's messages for any name.
func FuzzNameIsDNSSubdomain(f *testing.F) {
	f.Add("app.187a6b2c3d", false)
	f.Add("a-.b", true)
	f.Fuzz(func(t *testing.T, name string, prefix bool) {
		assert.Equal(t, apivalidation.NameIsDNSSubdomain(name, prefix), kinds.NameIsDNSSubdomain(name, prefix))
	})
}
