package crd_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/opemu/opemu/crd"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/json"
)

// wideCRD is CRD i of a kind operators install by the dozen: a 56 KB schema of 60 spec fields
// (every fifth an object of 8, nested twice) and 20 status fields, each with a description.
func wideCRD(tb testing.TB, i int) *apiextv1.CustomResourceDefinition {
	tb.Helper()
	var props func(prefix string, n, depth int) map[string]apiextv1.JSONSchemaProps
	props = func(prefix string, n, depth int) map[string]apiextv1.JSONSchemaProps {
		out := make(map[string]apiextv1.JSONSchemaProps, n)
		for j := range n {
			name := fmt.Sprintf("%s%d", prefix, j)
			switch {
			case depth > 0 && j%5 == 0:
				out[name] = apiextv1.JSONSchemaProps{Type: "object", Description: name + " holds the nested settings of this part of the workload, as the operator reads them.", Properties: props(name+"x", 8, depth-1)}
			case j%7 == 1:
				out[name] = apiextv1.JSONSchemaProps{Type: "array", Description: name + " lists the items this component references by name.", Items: &apiextv1.JSONSchemaPropsOrArray{Schema: &apiextv1.JSONSchemaProps{Type: "string", MaxLength: ptr(int64(63))}}}
			case j%3 == 0:
				out[name] = apiextv1.JSONSchemaProps{Type: "integer", Format: "int32", Minimum: ptr(0.0), Description: name + " is a count the controller keeps within bounds."}
			default:
				out[name] = apiextv1.JSONSchemaProps{Type: "string", MaxLength: ptr(int64(253)), Description: name + " is a setting of the workload that the operator passes through."}
			}
		}
		return out
	}
	group := fmt.Sprintf("g%d.example.com", i)
	return &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextv1.NamespaceScoped,
			Names: apiextv1.CustomResourceDefinitionNames{Kind: "Widget", ListKind: "WidgetList", Plural: "widgets", Singular: "widget"},
			Versions: []apiextv1.CustomResourceDefinitionVersion{{
				Name: "v1", Served: true, Storage: true,
				Subresources: &apiextv1.CustomResourceSubresources{Status: &apiextv1.CustomResourceSubresourceStatus{}},
				Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextv1.JSONSchemaProps{
					"spec":   {Type: "object", Properties: props("f", 60, 2)},
					"status": {Type: "object", Properties: props("s", 20, 1)},
				}}},
			}},
		},
	}
}

// BenchmarkRegisterWideCRDs registers 50 CRDs of 56 KB (wideCRD) and reports the live heap
// each keeps once registered (bytes/CRD, after a GC), and its JSON size.
func BenchmarkRegisterWideCRDs(b *testing.B) {
	const n = 50
	defs := make([]*apiextv1.CustomResourceDefinition, n)
	for i := range defs {
		defs[i] = wideCRD(b, i)
	}
	raw, err := json.Marshal(defs[0])
	if err != nil {
		b.Fatal(err)
	}
	var kept []*crd.Registry
	var perCRD float64
	for b.Loop() {
		r, _ := newRegistry(b)
		before := liveHeap()
		for _, c := range defs {
			if _, errs, err := r.Register(c); err != nil || len(errs) > 0 {
				b.Fatal(err, errs)
			}
		}
		perCRD = float64(liveHeap()-before) / n
		kept = append(kept[:0], r) // the registry stays live across the measure
	}
	runtime.KeepAlive(kept)
	b.ReportMetric(perCRD, "bytes/CRD")
	b.ReportMetric(float64(len(raw)), "json-bytes/CRD")
}

// liveHeap is the heap in use after a collection.
func liveHeap() int64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// BenchmarkWideCRDTypes types an object of each of 50 registered CRDs of 56 KB (wideCRD):
// the first write of each builds its structured-merge-diff types (crd/types.go). It reports
// what that costs once per CRD (ns/CRD) and the live heap the types keep (bytes/CRD, after a
// GC), beyond what registering kept.
func BenchmarkWideCRDTypes(b *testing.B) {
	const n = 50
	defs := make([]*apiextv1.CustomResourceDefinition, n)
	for i := range defs {
		defs[i] = wideCRD(b, i)
	}
	var kept []*crd.Registry
	var perCRD, nsPerCRD float64
	for b.Loop() {
		r, ks := newRegistry(b)
		for _, c := range defs {
			if _, errs, err := r.Register(c); err != nil || len(errs) > 0 {
				b.Fatal(err, errs)
			}
		}
		before := liveHeap()
		start := time.Now()
		for _, c := range defs {
			k, ok := ks.ForKind(c.Spec.Group+"/v1", "Widget")
			if !ok || k.TypeConverter == nil {
				b.Fatalf("%s: no kind with types", c.Name)
			}
			obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": c.Spec.Group + "/v1", "kind": "Widget",
				"metadata": map[string]any{"name": "w"}, "spec": map[string]any{"f1": []any{"a"}}}}
			if _, err := k.TypeConverter.ObjectToTyped(obj); err != nil {
				b.Fatal(err)
			}
		}
		nsPerCRD = float64(time.Since(start).Nanoseconds()) / n
		perCRD = float64(liveHeap()-before) / n
		kept = append(kept[:0], r)
	}
	runtime.KeepAlive(kept)
	b.ReportMetric(nsPerCRD, "ns/CRD")
	b.ReportMetric(perCRD, "bytes/CRD")
}
