package kinds_test

import (
	"strings"
	"testing"

	"github.com/opemu/opemu/kinds"
	"github.com/stretchr/testify/assert"
	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestNameIsDNSSubdomain(t *testing.T) {
	t.Parallel()
	for _, name := range []string{
		"a", "app-1", "app.187a6b2c3d", "a.b.c", "0", strings.Repeat("a", 253), strings.Repeat("a", 254),
		"", "-a", "a-", "a..b", ".a", "a.", "A", "a_b", "a.-b", "日本", "a b", "-", "a-b-", "ab-",
		strings.Repeat("x", 1<<20), strings.Repeat("x", 1<<20) + "-", strings.Repeat("X", 1<<20),
	} {
		for _, prefix := range []bool{false, true} {
			assert.Equal(t, apivalidation.NameIsDNSSubdomain(name, prefix), kinds.NameIsDNSSubdomain(name, prefix), "%.80q prefix=%v", name, prefix)
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

func TestLabelsValid(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		labels map[string]string
	}{
		{name: "none", labels: nil},
		{name: "plain", labels: map[string]string{"app": "web", "tier": ""}},
		{name: "prefixed", labels: map[string]string{"app.kubernetes.io/name": "My_App.v1", "example.com/x": "Y"}},
		{name: "longest", labels: map[string]string{strings.Repeat("a", 253) + "/" + strings.Repeat("b", 63): strings.Repeat("c", 63)}},
		{name: "long value", labels: map[string]string{"a": strings.Repeat("c", 64)}},
		{name: "long name", labels: map[string]string{strings.Repeat("b", 64): ""}},
		{name: "bad prefix", labels: map[string]string{"Example.com/x": "y"}},
		{name: "empty prefix", labels: map[string]string{"/x": "y"}},
		{name: "two slashes", labels: map[string]string{"a/b/c": "y"}},
		{name: "bad value", labels: map[string]string{"a": "-b"}},
		{name: "empty key", labels: map[string]string{"": "b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			errs := metav1validation.ValidateLabels(tc.labels, field.NewPath("labels"))
			assert.Equal(t, len(errs) == 0, kinds.LabelsValid(tc.labels), "%v", errs)
		})
	}
}

// FuzzLabelsValid checks that LabelsValid passes no label ValidateLabels refuses.
func FuzzLabelsValid(f *testing.F) {
	f.Add("app.kubernetes.io/name", "web")
	f.Add("a/b", "-")
	f.Fuzz(func(t *testing.T, key, value string) {
		labels := map[string]string{key: value}
		if kinds.LabelsValid(labels) {
			assert.Empty(t, metav1validation.ValidateLabels(labels, field.NewPath("labels")), "%q: %q", key, value)
		}
	})
}

// FuzzDNSLabelValid checks that DNSLabelValid passes no namespace name apivalidation refuses.
func FuzzDNSLabelValid(f *testing.F) {
	f.Add("default")
	f.Add("a.b")
	f.Add(strings.Repeat("a", 64))
	f.Fuzz(func(t *testing.T, s string) {
		if kinds.DNSLabelValid(s) {
			assert.Empty(t, apivalidation.ValidateNamespaceName(s, false), "%q", s)
		}
	})
}

// FuzzFinalizersValid checks that FinalizersValid passes no finalizers ValidateFinalizers
// refuses.
func FuzzFinalizersValid(f *testing.F) {
	f.Add("example.com/cleanup", "orphan")
	f.Add("orphan", "foregroundDeletion")
	f.Add("a/b/c", "-x")
	f.Fuzz(func(t *testing.T, a, b string) {
		fins := []string{a, b}
		if kinds.FinalizersValid(fins) {
			assert.Empty(t, apivalidation.ValidateFinalizers(fins, field.NewPath("finalizers")), "%q", fins)
		}
	})
}
