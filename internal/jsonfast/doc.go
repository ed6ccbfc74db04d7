// Package jsonfast is encoding/json for the JSON opemu decodes and encodes on every write
// (request bodies, stored objects, schema defaults), made fast for it: a decoder (Parse,
// Decode, DecodeObject) and an encoder (Marshal, AppendMarshal, AppendString) written for
// map[string]any, []any, string, json.Number, bool and nil, where encoding/json's reflection
// cost most of a write's time.
//
// It is the one door to opemu's JSON shortcut: every answer is encoding/json's (UseNumber on
// decoding, HTML escaping on encoding). What the fast paths cannot vouch for they hand to
// encoding/json, which then gives the value or the error. FuzzParse and FuzzMarshal hold them
// to encoding/json; docs/DESIGN.md ("Shortcuts") gives the figures that justified them.
//
// Non-goals: streaming, struct types (encoding/json does those), any other JSON dialect.
//
// Concurrency: every function is safe for concurrent use; nothing is shared between calls.
package jsonfast
