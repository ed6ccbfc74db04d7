package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/crd"
	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Tables for `kubectl get` (SPEC §4.2): a meta.k8s.io/v1 Table when the Accept header asks for
// one, with the CRD's printer columns or kubectl's usual columns for built-ins.

// wantsTable reports whether the client asked for a Table (it always offers JSON as well).
func wantsTable(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept"), ",") {
		params := map[string]string{}
		for _, p := range strings.Split(part, ";")[1:] {
			if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok {
				params[k] = v
			}
		}
		if params["as"] == "Table" && params["g"] == "meta.k8s.io" && params["v"] == "v1" {
			return true
		}
	}
	return false
}

// column is one Table column and how to fill it.
type column struct {
	def  metav1.TableColumnDefinition
	cell func(obj map[string]any, now time.Time) any
}

func jsonPathCell(path, typ string) func(map[string]any, time.Time) any {
	keys := jsonPath(path)
	return func(obj map[string]any, now time.Time) any {
		v, ok := getPath(obj, keys)
		if !ok {
			return nil
		}
		switch typ {
		case "integer":
			if n, ok := v.(json.Number); ok {
				if i, err := n.Int64(); err == nil {
					return i
				}
			}
		case "number":
			if n, ok := v.(json.Number); ok {
				if f, err := n.Float64(); err == nil {
					return f
				}
			}
		case "date":
			if s, ok := v.(string); ok {
				return age(s, now)
			}
		}
		switch v.(type) {
		case map[string]any, []any:
			b, _ := json.Marshal(v)
			return string(b)
		}
		return v
	}
}

func age(ts string, now time.Time) string {
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return "<invalid>"
	}
	return duration.HumanDuration(now.Sub(t))
}

var nameColumn = column{
	def:  metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Description: "Name must be unique within a namespace."},
	cell: func(obj map[string]any, _ time.Time) any { return stringOf(metadataOf(obj)["name"]) },
}

func ageColumn(name string) column {
	return column{def: metav1.TableColumnDefinition{Name: name, Type: "date", Description: "CreationTimestamp is the time the object was created."},
		cell: jsonPathCell(".metadata.creationTimestamp", "date")}
}

func pathColumn(name, path, typ string, priority int32) column {
	return column{def: metav1.TableColumnDefinition{Name: name, Type: typ, Priority: priority}, cell: jsonPathCell(path, typ)}
}

// columns returns the Table columns of k.
func columns(k *crd.Kind) []column {
	switch {
	case k.Kind == "Event" && k.Group == "":
		return []column{
			{def: metav1.TableColumnDefinition{Name: "Last Seen", Type: "string"}, cell: jsonPathCell(".lastTimestamp", "date")},
			pathColumn("Type", ".type", "string", 0),
			pathColumn("Reason", ".reason", "string", 0),
			{def: metav1.TableColumnDefinition{Name: "Object", Type: "string"}, cell: func(obj map[string]any, _ time.Time) any {
				io, _ := obj["involvedObject"].(map[string]any)
				return strings.ToLower(stringOf(io["kind"])) + "/" + stringOf(io["name"])
			}},
			pathColumn("Message", ".message", "string", 0),
			pathColumn("Source", ".source.component", "string", 1),
			{def: metav1.TableColumnDefinition{Name: "First Seen", Type: "string", Priority: 1}, cell: jsonPathCell(".firstTimestamp", "date")},
			pathColumn("Count", ".count", "integer", 1),
			{def: metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name", Priority: 1}, cell: nameColumn.cell},
		}
	case k.Kind == "Namespace" && k.Group == "":
		return []column{nameColumn, pathColumn("Status", ".status.phase", "string", 0), ageColumn("Age")}
	case k.Kind == "Lease":
		return []column{nameColumn, pathColumn("Holder", ".spec.holderIdentity", "string", 0), ageColumn("Age")}
	case k == crdKind:
		return []column{nameColumn, {def: metav1.TableColumnDefinition{Name: "Created At", Type: "date"}, cell: func(obj map[string]any, _ time.Time) any {
			return stringOf(metadataOf(obj)["creationTimestamp"])
		}}}
	}
	cols := []column{nameColumn}
	for _, pc := range k.PrinterColumns {
		cols = append(cols, printerColumn(pc))
	}
	return cols
}

func printerColumn(pc apiextv1.CustomResourceColumnDefinition) column {
	desc := pc.Description
	if desc == "" {
		desc = "Custom resource definition column (in JSONPath format): " + pc.JSONPath
	}
	return column{def: metav1.TableColumnDefinition{Name: pc.Name, Type: pc.Type, Format: pc.Format, Description: desc, Priority: pc.Priority},
		cell: jsonPathCell(pc.JSONPath, pc.Type)}
}

// table builds a Table of objs; includeObject is "", "Metadata", "Object" or "None".
func table(k *crd.Kind, objs []*cache.Object, meta metav1.ListMeta, includeObject string, headers bool, now time.Time) (*metav1.Table, error) {
	cols := columns(k)
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}, ListMeta: meta, Rows: []metav1.TableRow{}}
	if headers {
		t.ColumnDefinitions = make([]metav1.TableColumnDefinition, len(cols))
		for i, c := range cols {
			t.ColumnDefinitions[i] = c.def
		}
	}
	for _, o := range objs {
		obj, err := o.Decode()
		if err != nil {
			return nil, err
		}
		row := metav1.TableRow{Cells: make([]any, len(cols))}
		for i, c := range cols {
			row.Cells[i] = c.cell(obj, now)
		}
		switch includeObject {
		case "Object":
			row.Object.Raw = o.Raw()
		case "None":
		default:
			pom := map[string]any{"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}
			raw, err := json.Marshal(pom)
			if err != nil {
				return nil, err
			}
			row.Object.Raw = raw
		}
		t.Rows = append(t.Rows, row)
	}
	return t, nil
}

func validIncludeObject(v string) error {
	switch v {
	case "", "None", "Metadata", "Object":
		return nil
	}
	return badRequest("includeObject must be None, Metadata or Object, not %q", v)
}
