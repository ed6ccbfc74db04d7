package kinds

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1beta1 "k8s.io/api/rbac/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var update = flag.Bool("update", false, "rewrite swaggerdoc.json.gz")

// swaggerDocs returns, by OpenAPI name, the SwaggerDoc of every named Go type the served kinds
// reach.
func swaggerDocs() map[string]map[string]string {
	ts := newTypeSet()
	out := map[string]map[string]string{}
	seen := map[*goType]bool{}
	var walk func(g *goType)
	walk = func(g *goType) {
		if seen[g] {
			return
		}
		seen[g] = true
		if d, ok := reflect.Zero(g.t).Interface().(interface{ SwaggerDoc() map[string]string }); ok && g.name != "" {
			out[g.name] = d.SwaggerDoc()
		}
		if g.kind == kindObject {
			addInlineDocs(g.t, out)
		}
		if g.elem != nil {
			walk(g.elem)
		}
		for _, n := range g.order {
			walk(g.fields[n].typ)
		}
	}
	for _, k := range typedKinds(ts) {
		walk(ts.of(k.Schema.(*typedSchema).t))
	}
	// The types whose descriptions the Table columns of other kinds carry, as kube-apiserver's
	// printers take them.
	for _, obj := range []any{&corev1.Event{}, &coordinationv1.Lease{}, &rbacv1beta1.RoleBinding{}, &rbacv1beta1.ClusterRoleBinding{}} {
		walk(ts.of(reflect.TypeOf(obj).Elem()))
	}
	// What custom resources' OpenAPI documents read (the metadata types, the descriptions of an
	// object's and a list's metadata), and the types of the discovery documents.
	for _, t := range append(metaTypes, DiscoveryTypes.Version, DiscoveryTypes.APIVersions, DiscoveryTypes.APIGroupList) {
		walk(ts.of(t))
	}
	out[partialObjectDefinition] = metav1.PartialObjectMetadata{}.SwaggerDoc()
	out[partialListDefinition] = metav1.PartialObjectMetadataList{}.SwaggerDoc()
	return out
}

// addInlineDocs records the SwaggerDoc of the structs t embeds inline (TypeMeta): their fields
// are t's own in JSON, described by the embedded type's method.
func addInlineDocs(t reflect.Type, out map[string]map[string]string) {
	if t.Kind() != reflect.Struct {
		return
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); !f.Anonymous || name != "" || f.Type.Kind() != reflect.Struct {
			continue
		}
		if d, ok := reflect.Zero(f.Type).Interface().(interface{ SwaggerDoc() map[string]string }); ok {
			out[definitionName(f.Type)] = d.SwaggerDoc()
		}
		addInlineDocs(f.Type, out)
	}
}

// TestColumnDescriptions checks that every built-in kind's columns are described, as
// kube-apiserver's printers describe them.
func TestColumnDescriptions(t *testing.T) {
	for _, k := range Builtins() {
		for _, c := range k.Columns {
			assert.NotEmpty(t, c.Definition().Description, "%s's column %s", k.Kind, c.Def.Name)
		}
	}
}

// TestSwaggerDocs keeps swaggerdoc.json.gz equal to the SwaggerDoc methods of the types the
// served kinds reach (go test ./kinds -run TestSwaggerDocs -update rewrites it after a kind is
// added or k8s.io/api is upgraded).
func TestSwaggerDocs(t *testing.T) {
	want := swaggerDocs()
	require.NotEmpty(t, want["io.k8s.api.apps.v1.DeploymentSpec"]["replicas"])
	require.NotEmpty(t, want[typeMetaDefinition]["apiVersion"], "inline TypeMeta's fields are described")
	if *update {
		raw, err := json.Marshal(want)
		require.NoError(t, err)
		var b bytes.Buffer
		zw, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
		require.NoError(t, err)
		_, err = zw.Write(raw)
		require.NoError(t, err)
		require.NoError(t, zw.Close())
		require.NoError(t, os.WriteFile("swaggerdoc.json.gz", b.Bytes(), 0o644))
	}
	data, err := os.ReadFile("swaggerdoc.json.gz")
	require.NoError(t, err)
	have, err := decodeSwaggerDocs(data)
	require.NoError(t, err)
	assert.Equal(t, want, have, "swaggerdoc.json.gz is stale: go test ./kinds -run TestSwaggerDocs -update")
	var d docTable
	if !*update { // the binary embeds the file as it was when compiled
		assert.Equal(t, want["io.k8s.api.core.v1.Container"], d.of("io.k8s.api.core.v1.Container"), "the embedded copy is the file")
	}
	assert.Nil(t, d.of("io.k8s.api.core.v1.NotAType"))
}
