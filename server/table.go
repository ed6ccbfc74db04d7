package server

import (
	"time"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
)

// Tables for `kubectl get` (SPEC §4.2): a meta.k8s.io Table (v1 or v1beta1) when the Accept
// header asks for one (negotiate.go), with the CRD's printer columns or kube-apiserver's
// printers' columns for built-ins.

// columns returns the Table columns of k (Name and Age when it has none).
func columns(k *kinds.Kind) []kinds.Column {
	if len(k.Columns) == 0 {
		return []kinds.Column{kinds.NameColumn, kinds.AgeColumn("Age")}
	}
	return k.Columns
}

// answerTable sends objs as a meta.k8s.io Table (kubectl get) in out's version and media type.
func (s *Server) answerTable(c *echo.Context, code int, t registry.Target, objs []*cache.Object, meta metav1.ListMeta, out output) error {
	include, err := includeObject(c)
	if err != nil {
		return err
	}
	rows, err := tableSources(t.Kind, objs)
	if err != nil {
		return err
	}
	tbl := table(t.Kind, rows, meta, include, out.version, true, s.cfg.Clock.Now())
	return writeValueAs(c, code, out.mediaType, tbl, nil)
}

// includeObject is the request's includeObject, checked as kube-apiserver checks TableOptions.
func includeObject(c *echo.Context) (string, error) {
	v := c.QueryParam("includeObject")
	if errs := metav1validation.ValidateTableOptions(&metav1.TableOptions{IncludeObject: metav1.IncludeObjectPolicy(v)}); len(errs) > 0 {
		return "", badRequest("Unable to convert to Table as requested: %v", errs[0].Error())
	}
	return v, nil
}

// tableSource is what one row is made from: the object decoded, and its JSON as the client
// reads it.
type tableSource struct {
	obj map[string]any
	raw []byte
}

// tableSources decodes objs as the client reads k (converted, for a view or a kind with Upgrade).
func tableSources(k *kinds.Kind, objs []*cache.Object) ([]tableSource, error) {
	out := make([]tableSource, len(objs))
	for i, o := range objs {
		raw := o.Raw()
		var err error
		if k.ConvertsReads() {
			if raw, err = registry.ListView(registry.Target{Kind: k}, o); err != nil {
				return nil, err
			}
		}
		var obj map[string]any
		if k.ConvertsReads() {
			obj, err = cache.DecodeJSON(raw)
		} else {
			obj, err = o.Decode()
		}
		if err != nil {
			return nil, err
		}
		out[i] = tableSource{obj, raw}
	}
	return out, nil
}

// table builds a Table (meta.k8s.io version) of rows; includeObject is "", "Metadata",
// "Object" or "None"; headers says whether it carries the column definitions.
func table(k *kinds.Kind, rows []tableSource, meta metav1.ListMeta, includeObject, version string, headers bool, now time.Time) *metav1.Table {
	cols := columns(k)
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{Kind: "Table", APIVersion: metav1.GroupName + "/" + version}, ListMeta: meta, Rows: []metav1.TableRow{}}
	if headers {
		t.ColumnDefinitions = make([]metav1.TableColumnDefinition, len(cols))
		for i, c := range cols {
			t.ColumnDefinitions[i] = c.Definition()
		}
	}
	for _, src := range rows {
		row := metav1.TableRow{Cells: make([]any, len(cols))}
		for i, c := range cols {
			row.Cells[i] = c.Cell(src.obj, now)
		}
		switch includeObject {
		case "Object":
			row.Object.Raw = src.raw
		case "None":
		default:
			row.Object.Raw, _ = appendPartial(nil, src.raw, version)
		}
		t.Rows = append(t.Rows, row)
	}
	return t
}
