package yamlsize

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v2"
)

// Measure returns at least how many bytes of JSON the first YAML document in doc converts to
// (as sigs.k8s.io/yaml's YAMLToJSON converts it, which reads the first document only), and
// whether that is more than limit. Only documents with aliases are measured: any other reports
// 0, false without being decoded, as does a document the library cannot decode (the decoder
// that converts it refuses it in its own words). The count stops once it passes limit, so a
// document of any expansion costs about one decoding of it.
func Measure(doc []byte, limit int) (size int, over bool) {
	if bytes.IndexByte(doc, '*') < 0 || bytes.IndexByte(doc, '&') < 0 {
		return 0, false // no alias (an alias is "*name" of an anchor "&name")
	}
	var v any
	if err := yaml.Unmarshal(doc, &v); err != nil {
		return 0, false
	}
	c := counter{left: limit}
	if !c.value(v) {
		return limit + 1, true
	}
	return limit - c.left, false
}

// counter adds up JSON text against what is left of a limit.
type counter struct{ left int }

// add takes n bytes; false once the limit is passed.
func (c *counter) add(n int) bool {
	c.left -= n
	return c.left >= 0
}

// value counts v's JSON text: a string's length and its quotes (escapes would only add), two
// brackets and a comma per element, a key's text with its quotes and colon, and the shortest
// text of any other scalar (a number's digits; true, false and null). An alias decoded the
// library's way is the same Go value again, counted again, as the conversion writes it again.
func (c *counter) value(v any) bool {
	switch v := v.(type) {
	case string:
		return c.add(len(v) + 3)
	case []any:
		if !c.add(2) {
			return false
		}
		for _, e := range v {
			if !c.value(e) {
				return false
			}
		}
		return true
	case map[any]any:
		if !c.add(2) {
			return false
		}
		for k, e := range v {
			if !c.key(k) || !c.value(e) {
				return false
			}
		}
		return true
	case nil:
		return c.add(5)
	default: // a number, a boolean, a timestamp: its text
		return c.add(len(fmt.Sprint(v)) + 1)
	}
}

// key counts a mapping key as JSON writes it: a string key as it is, any other (a number, a
// boolean, null) as its text, all of them quoted and followed by a colon.
func (c *counter) key(k any) bool {
	if s, ok := k.(string); ok {
		return c.add(len(s) + 3)
	}
	return c.add(len(fmt.Sprint(k)) + 3)
}
