package etcd

import (
	"strings"
	"unique"

	"github.com/opemu/opemu/cache"
)

// Keys are <prefix>/<group, or "core">/<resource>/<namespace>/<name>; a cluster-scoped
// object's namespace is empty. Every segment is a Kubernetes name or group, so none holds a
// slash. Keys under the prefix that do not have five segments are opemu's own (the progress
// key) and are not objects.

const coreGroup = "core"

// keys encodes and decodes the etcd keys under one prefix.
type keys struct {
	prefix string // "/opemu": no trailing slash
}

// root is the range every object key is in (the watch and the list range).
func (k keys) root() string { return k.prefix + "/" }

// of returns the etcd key of key.
func (k keys) of(key cache.Key) string {
	group := key.Group
	if group == "" {
		group = coreGroup
	}
	return k.prefix + "/" + group + "/" + key.Resource + "/" + key.Namespace + "/" + key.Name
}

// resource returns the range of gr's keys.
func (k keys) resource(gr cache.GroupResource) string {
	group := gr.Group
	if group == "" {
		group = coreGroup
	}
	return k.prefix + "/" + group + "/" + gr.Resource + "/"
}

// parse returns the object key of an etcd key, ok false for keys that are not objects'.
func (k keys) parse(ekey []byte) (cache.Key, bool) {
	s := string(ekey)
	if !strings.HasPrefix(s, k.prefix+"/") {
		return cache.Key{}, false
	}
	parts := strings.Split(s[len(k.prefix)+1:], "/")
	if len(parts) != 4 || parts[0] == "" || parts[1] == "" || parts[3] == "" {
		return cache.Key{}, false
	}
	group := parts[0]
	if group == coreGroup {
		group = ""
	}
	// Every object of a resource repeats its group, resource and namespace: share them.
	return cache.Key{Group: intern(group), Resource: intern(parts[1]), Namespace: intern(parts[2]), Name: parts[3]}, true
}

func intern(s string) string { return unique.Make(s).Value() }
