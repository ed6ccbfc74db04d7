package cache

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
)

// FuzzVersionFieldAt: finding the version member by its digits answers as searching for the
// whole member does: its one place, or -1 when it is absent or there more than once.
func FuzzVersionFieldAt(f *testing.F) {
	f.Add(`{"metadata":{"name":"a","resourceVersion":"18446744073709551615","uid":"u"}}`, rvPlaceholder)
	f.Add(`{"a":{"resourceVersion":"12"},"metadata":{"resourceVersion":"12"}}`, "12")
	f.Add(`{"x":"1212","resourceVersion":"121"}`, "12")
	f.Add(`"resourceVersion":"1"`, "1")
	f.Add(`"resourceVersion":""`, "")
	f.Fuzz(func(t *testing.T, raw, rv string) {
		field := []byte(`"resourceVersion":"` + rv + `"`)
		want := bytes.Index([]byte(raw), field)
		if want >= 0 && bytes.Contains([]byte(raw)[want+len(field):], field) {
			want = -1
		}
		assert.Equal(t, want, versionFieldAt([]byte(raw), rv), "%q in %q", rv, raw)
	})
}
