package crd

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/conversion"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/util/webhook"
)

// A CRD with several versions stores its objects in one, the storage version, and serves the
// others as views of them (kinds.Conversion): a read converts the stored object into the
// version asked for, a write converts the object it is sent into the storage version, as
// kube-apiserver's custom resource handler does at its storage codec. The conversion itself is
// apiextensions-apiserver's (pkg/apiserver/conversion): its nop converter for strategy None
// (apiVersion rewritten) and its webhook converter for strategy Webhook (a ConversionReview
// sent to the CRD's webhook). What the converter returns is then pruned and defaulted with the
// schema of the version it is in, as kube-apiserver's schema-coercing converter does.

// newConverterFactory is apiextensions-apiserver's converter factory. A webhook's service
// cannot be resolved (opemu runs no Services, as its admission webhooks say): its calls fail
// with that reason, and url is what works. Its calls report failures without what the other
// end said, and log the cause to log (webhookcall.go).
func newConverterFactory(log *slog.Logger) (*conversion.CRConverterFactory, error) {
	return conversion.NewCRConverterFactory(noServices{}, reportingResolver(log))
}

// noServices is the webhook.ServiceResolver of a server that runs no Services.
type noServices struct{}

var _ webhook.ServiceResolver = noServices{}

func (noServices) ResolveEndpoint(namespace, name string, _ int32) (*url.URL, error) {
	return nil, fmt.Errorf("clientConfig.service %s/%s cannot be reached: opemu runs no Services; give clientConfig.url instead (e.g. https://127.0.0.1:9443/convert)", namespace, name)
}

// versions converts the objects of one CRD between its versions.
type versions struct {
	group string
	// conv is the unsafe converter: it converts its argument in place (the callers own theirs).
	conv runtime.ObjectConvertor
	// safe is the converter that copies first, which field managers get (they convert what
	// they only read), for a webhook's conversion; nil for strategy None, which rewrites
	// apiVersion only, as the field managers' own convertor does.
	safe runtime.ObjectConvertor
	// schemas are the schemas of the CRD's versions, by apiVersion: a stored object is
	// defaulted with its own version's on every read.
	schemas map[string]kinds.Schema
	// decoded says conv's objects are decoded anew (a webhook's answer: apimachinery's numbers,
	// int64 and float64), which are made objects as opemu holds them (json.Number).
	decoded bool
}

// converterFor returns the conversion of c's objects, whose versions' schemas (by apiVersion)
// are schemas; nil when c has a single version.
func (r *Registry) converterFor(c *apiextv1.CustomResourceDefinition, schemas map[string]kinds.Schema) (*versions, error) {
	if len(c.Spec.Versions) < 2 {
		return nil, nil
	}
	if c.Spec.Conversion == nil {
		return nil, errors.New("no conversion")
	}
	safe, unsafe, err := r.factory.NewConverter(c)
	if err != nil {
		return nil, err
	}
	v := &versions{group: c.Spec.Group, conv: unsafe, schemas: schemas, decoded: c.Spec.Conversion.Strategy == apiextv1.WebhookConverter}
	if v.decoded {
		v.safe = safe
	}
	return v, nil
}

// to converts obj (its own: it may be changed) into version and returns the result.
func (v *versions) to(obj map[string]any, version string) (map[string]any, error) {
	gv := k8sschema.GroupVersion{Group: v.group, Version: version}
	u := &unstructured.Unstructured{Object: obj}
	if u.GetAPIVersion() == gv.String() {
		return obj, nil
	}
	out, err := v.conv.ConvertToVersion(u, gv)
	if err != nil {
		return nil, err
	}
	converted, ok := out.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("conversion into %s returned a %T", gv, out)
	}
	if !v.decoded {
		return converted.Object, nil
	}
	raw, err := json.Marshal(converted.Object)
	if err != nil {
		return nil, err
	}
	return cache.DecodeJSON(raw)
}

// view makes k, a served version other than the storage version st, a view of the objects
// stored in st: reads convert into k's version (reader); writes
// convert into st's version and prune with its schema, then follow st's write path.
func (v *versions) view(k, st *kinds.Kind) {
	fields := map[string]string{}
	for _, f := range k.Fields {
		fields[f.Name] = f.Name
	}
	k.Fields = nil // a view's selectable fields are its FieldLabels; the store indexes st's
	k.Conversion = &kinds.Conversion{
		Storage: cache.GroupResource{Group: st.Group, Resource: st.Plural},
		ToStorage: func(obj, _ map[string]any) (map[string]any, error) {
			out, err := v.to(obj, st.Version)
			if err != nil {
				return nil, err
			}
			if st.Schema != nil {
				st.Schema.Prune(out) // silently, as the storage codec prunes
			}
			return out, nil
		},
		FromStorage: v.reader(k),
		FieldLabels: fields,
	}
}

// reader converts a stored object into k's version as kube-apiserver reads one: defaulted
// with the schema of the version it is stored in (the storage codec's defaulting), converted,
// then pruned with k's schema (the schema-coercing converter). k's own defaults are not
// applied: a read defaults in the stored version only.
func (v *versions) reader(k *kinds.Kind) func(map[string]any) (map[string]any, error) {
	return func(obj map[string]any) (map[string]any, error) {
		if av, _ := obj["apiVersion"].(string); v.schemas[av] != nil {
			v.schemas[av].Default(obj)
		}
		out, err := v.to(obj, k.Version)
		if err != nil {
			return nil, err
		}
		if k.Schema != nil {
			k.Schema.Prune(out)
		}
		return out, nil
	}
}

// deprecation is the Warning every request of a deprecated version gets, as kube-apiserver
// words it when the CRD gives none.
func deprecation(group, kind string, v apiextv1.CustomResourceDefinitionVersion) string {
	if !v.Deprecated {
		return ""
	}
	if v.DeprecationWarning != nil {
		return *v.DeprecationWarning
	}
	return fmt.Sprintf("%s/%s %s is deprecated", group, v.Name, kind)
}
