package kinds_test

import (
	"strings"
	"testing"

	"github.com/opemu/opemu/kinds"
)

// BenchmarkNameIsDNSSubdomain: a usual name, and the megabyte name of a refused write (which
// must be refused in microseconds, not in the seconds a regular expression took under load).
func BenchmarkNameIsDNSSubdomain(b *testing.B) {
	for _, bc := range []struct{ scenario, name string }{
		{"name=usual", "web-7d4b9c8f6d.example"},
		{"name=1MiB", strings.Repeat("x", 1<<20)},
		{"name=1MiB-bad", strings.Repeat("X", 1<<20)},
	} {
		b.Run(bc.scenario, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				kinds.NameIsDNSSubdomain(bc.name, false)
			}
		})
	}
}
