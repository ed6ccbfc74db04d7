package kinds

import (
	"encoding/json"
	"time"

	apiextv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
)

// Table columns: the builders kinds use for their Columns, and the Name column every Table
// starts with.

// objectMeta is the OpenAPI name of metav1.ObjectMeta, whose descriptions the Name and Age
// columns carry.
const objectMeta = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"

// NameColumn is the first column of every Table.
var NameColumn = Column{
	Def:  metav1.TableColumnDefinition{Name: "Name", Type: "string", Format: "name"},
	Doc:  [2]string{objectMeta, "name"},
	Cell: func(obj map[string]any, _ time.Time) any { return stringAt(obj, "metadata.name") },
}

// AgeColumn shows how long ago the object was created, as a date column (a custom resource's
// Age; kube-apiserver's printers' Age columns are strings, ageColumn).
func AgeColumn(name string) Column {
	return Column{Def: metav1.TableColumnDefinition{Name: name, Type: "date"}, Doc: [2]string{objectMeta, "creationTimestamp"},
		Cell: PathCell(".metadata.creationTimestamp", "date")}
}

// PathColumn shows the value at a JSONPath like ".spec.replicas" as typ ("string", "integer",
// "number", "boolean" or "date"); priority 0 is shown by default, 1 with -o wide.
func PathColumn(name, path, typ string, priority int32) Column {
	return Column{Def: metav1.TableColumnDefinition{Name: name, Type: typ, Priority: priority}, Cell: PathCell(path, typ)}
}

// PrinterColumn turns a CRD's additionalPrinterColumn into a Column.
func PrinterColumn(pc apiextv1.CustomResourceColumnDefinition) Column {
	desc := pc.Description
	if desc == "" {
		desc = "Custom resource definition column (in JSONPath format): " + pc.JSONPath
	}
	return Column{Def: metav1.TableColumnDefinition{Name: pc.Name, Type: pc.Type, Format: pc.Format, Description: desc, Priority: pc.Priority},
		Cell: PathCell(pc.JSONPath, pc.Type)}
}

// PathCell returns the cell function of a JSONPath column: integers and numbers as numbers,
// dates as ages ("5m"), objects and lists as their JSON, nil when the path is absent.
func PathCell(path, typ string) func(map[string]any, time.Time) any {
	return func(obj map[string]any, now time.Time) any {
		v, ok := ValueAt(obj, path)
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
				return Age(s, now)
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

// Age is how long before now the RFC 3339 time ts was, the way kubectl shows it ("<unknown>"
// when there is none).
func Age(ts string, now time.Time) string {
	if ts == "" {
		return "<unknown>"
	}
	t, err := time.Parse(time.RFC3339, ts)
	if err != nil {
		return "<invalid>"
	}
	return duration.HumanDuration(now.Sub(t))
}

func stringAt(obj map[string]any, path string) string {
	v, _ := ValueAt(obj, path)
	s, _ := v.(string)
	return s
}
