package server

import "github.com/opemu/opemu/kinds"

// defaultTypeMeta fills a built-in kind's apiVersion and kind from the URL when the body leaves
// them out (absent, null or ""), as kube-apiserver's JSON and YAML decoders do for typed kinds
// (the URL's group, version and kind are the decoder's defaults). Python and JavaScript code
// builds such bodies from typed models (V1Namespace(metadata=...)).
//
// Custom resources are not filled: kube-apiserver decodes them as unstructured objects, which
// must name their kind (400 "Object 'Kind' is missing") and whose apiVersion must match the URL
// (400 otherwise); the registry's type check keeps those answers. A body that names another
// kind or version is left alone for that check to refuse, as kube-apiserver does.
func defaultTypeMeta(k *kinds.Kind, obj map[string]any) {
	if !k.BuiltIn() {
		return
	}
	if isUnset(obj, "kind") {
		obj["kind"] = k.Kind
	}
	if isUnset(obj, "apiVersion") {
		obj["apiVersion"] = k.GroupVersion()
	}
}

func isUnset(obj map[string]any, field string) bool {
	v, ok := obj[field]
	return !ok || v == nil || v == ""
}
