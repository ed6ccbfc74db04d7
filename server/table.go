package server

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// columns returns the Table columns of k (Name and Age when it has none).
func columns(k *kinds.Kind) []kinds.Column {
	if len(k.Columns) == 0 {
		return []kinds.Column{kinds.NameColumn, kinds.AgeColumn("Age")}
	}
	return k.Columns
}

// table builds a Table of objs; includeObject is "", "Metadata", "Object" or "None".
func table(k *kinds.Kind, objs []*cache.Object, meta metav1.ListMeta, includeObject string, headers bool, now time.Time) (*metav1.Table, error) {
	cols := columns(k)
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: "meta.k8s.io/v1"}, ListMeta: meta, Rows: []metav1.TableRow{}}
	if headers {
		t.ColumnDefinitions = make([]metav1.TableColumnDefinition, len(cols))
		for i, c := range cols {
			t.ColumnDefinitions[i] = c.Def
		}
	}
	for _, o := range objs {
		obj, err := o.Decode()
		if err != nil {
			return nil, err
		}
		raw := o.Raw()
		if k.Conversion != nil {
			if obj, err = k.Conversion.FromStorage(obj); err != nil {
				return nil, err
			}
			if raw, err = json.Marshal(obj); err != nil {
				return nil, err
			}
		}
		row := metav1.TableRow{Cells: make([]any, len(cols))}
		for i, c := range cols {
			row.Cells[i] = c.Cell(obj, now)
		}
		switch includeObject {
		case "Object":
			row.Object.Raw = raw
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
