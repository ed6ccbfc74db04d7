package calls

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// View is a Call as GET /calls shows it (JSON), made only when read.
type View struct {
	ID             uint64    `json:"id"`
	Start          time.Time `json:"start"`
	LatencySeconds float64   `json:"latencySeconds"`
	User           string    `json:"user,omitempty"`
	UID            string    `json:"uid,omitempty"`
	Groups         []string  `json:"groups,omitempty"`
	ServiceAccount string    `json:"serviceAccount,omitempty"`
	UserAgent      string    `json:"userAgent,omitempty"`
	FieldManager   string    `json:"fieldManager,omitempty"`
	SourceIP       string    `json:"sourceIP,omitempty"`
	Verb           string    `json:"verb"`
	APIGroup       string    `json:"apiGroup,omitempty"`
	APIVersion     string    `json:"apiVersion,omitempty"`
	Resource       string    `json:"resource,omitempty"`
	Subresource    string    `json:"subresource,omitempty"`
	Namespace      string    `json:"namespace,omitempty"`
	Name           string    `json:"name,omitempty"`
	RequestURI     string    `json:"requestURI,omitempty"`
	LabelSelector  string    `json:"labelSelector,omitempty"`
	FieldSelector  string    `json:"fieldSelector,omitempty"`
	// QueryResourceVersion is the resourceVersion the client asked for.
	QueryResourceVersion string `json:"queryResourceVersion,omitempty"`
	Code                 int32  `json:"code"`
	Reason               string `json:"reason,omitempty"`
	// ResourceVersion is the one the call produced or read.
	ResourceVersion string `json:"resourceVersion,omitempty"`
	WatchEvents     int64  `json:"watchEvents,omitempty"`
	Internal        bool   `json:"internal,omitempty"`
	Component       string `json:"component,omitempty"`
	Reconcile       string `json:"reconcile,omitempty"`
	Forbidden       bool   `json:"forbidden,omitempty"`
}

// View returns c as GET /calls shows it.
func (c *Call) View() View {
	v := View{ID: c.ID, Start: c.Start, LatencySeconds: c.Latency.Seconds(), User: c.User, UID: c.UID, Groups: c.Groups,
		UserAgent: c.UserAgent, FieldManager: c.FieldManager, SourceIP: c.SourceIP, Verb: c.Verb, APIGroup: c.APIGroup,
		APIVersion: c.APIVersion, Resource: c.Resource, Subresource: c.Subresource, Namespace: c.Namespace, Name: c.Name,
		RequestURI: c.RequestURI, LabelSelector: c.LabelSelector(), FieldSelector: c.FieldSelector(),
		QueryResourceVersion: c.QueryResourceVersion(), Code: c.Code, Reason: c.Reason, WatchEvents: c.WatchEvents,
		Internal: c.Internal, Component: c.Component, Reconcile: c.Reconcile, Forbidden: c.Forbidden}
	if ns, name, ok := c.ServiceAccount(); ok {
		v.ServiceAccount = ns + "/" + name
	}
	if c.ResourceVersion != 0 {
		v.ResourceVersion = fmt.Sprint(c.ResourceVersion)
	}
	return v
}

// List is the answer of GET /calls.
type List struct {
	Kind       string `json:"kind"`
	APIVersion string `json:"apiVersion"`
	// Size is how many calls the ring keeps; Last the ID of the latest call recorded.
	Size  int    `json:"size"`
	Last  uint64 `json:"last"`
	Items []View `json:"items"`
}

// NewList is the List of cs.
func NewList(cs []Call, size int, last uint64) List {
	l := List{Kind: "CallList", APIVersion: "opemu.dev/v1", Size: size, Last: last, Items: make([]View, len(cs))}
	for i := range cs {
		l.Items[i] = cs[i].View()
	}
	return l
}

// tableColumns are the columns of Table.
var tableColumns = []metav1.TableColumnDefinition{
	{Name: "ID", Type: "integer", Description: "The call's number in the record."},
	{Name: "Time", Type: "string", Format: "date-time", Description: "When the request arrived."},
	{Name: "User", Type: "string", Description: "The user, or the opemu component of an internal call."},
	{Name: "Verb", Type: "string"},
	{Name: "Resource", Type: "string", Description: "The resource and subresource, or the path."},
	{Name: "Namespace", Type: "string"},
	{Name: "Name", Type: "string"},
	{Name: "Code", Type: "integer"},
	{Name: "Latency", Type: "string"},
	{Name: "RV", Type: "string", Description: "The resourceVersion produced or read."},
	{Name: "Agent", Type: "string", Priority: 1},
	{Name: "Reconcile", Type: "string", Priority: 1},
}

// Table returns cs as a meta.k8s.io Table (kubectl's way to print them) of apiVersion
// meta.k8s.io/<version>.
func Table(cs []Call, version string) *metav1.Table {
	t := &metav1.Table{TypeMeta: metav1.TypeMeta{APIVersion: metav1.GroupName + "/" + version, Kind: "Table"},
		ColumnDefinitions: tableColumns, Rows: make([]metav1.TableRow, len(cs))}
	for i := range cs {
		c := &cs[i]
		res := resourceOf(c)
		if res == "" {
			res = c.Path()
		}
		rv := ""
		if c.ResourceVersion != 0 {
			rv = fmt.Sprint(c.ResourceVersion)
		}
		t.Rows[i] = metav1.TableRow{Cells: []any{int64(c.ID), c.Start.UTC().Format(time.RFC3339Nano), c.Actor(), c.Verb, res, c.Namespace,
			c.Name, int64(c.Code), c.Latency.Round(time.Microsecond).String(), rv, c.UserAgent, c.Reconcile},
			Object: runtime.RawExtension{}}
	}
	return t
}
