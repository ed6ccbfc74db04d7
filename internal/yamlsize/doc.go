// Package yamlsize measures what a YAML document becomes once its aliases are expanded, before
// anything expands them: sigs.k8s.io/yaml (kube-apiserver's YAML decoding, and opemu's) converts
// YAML to JSON by writing each alias out in full, so a 2 MB body of 500 aliases of one 2 MB
// scalar becomes 1 GB of JSON and several GB of decoded values. The YAML library's own guard
// (go.yaml.in/yaml/v2's "excessive aliasing") counts nodes, not bytes, and lets it through.
//
// Measure decodes the document with that same library, whose decoded values share an aliased
// scalar's text instead of copying it, and adds up the JSON the values would be written as,
// stopping at a limit.
//
// Non-goals: parsing YAML (the library does), and documents without aliases, whose JSON is at
// most a few times their own size.
//
// Concurrency: every function is safe for concurrent use; nothing is shared between calls.
package yamlsize
