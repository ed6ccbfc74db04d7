package server

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/munnerz/goautoneg"
	"github.com/opemu/opemu/kinds"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Content negotiation of answers, as kube-apiserver's (k8s.io/apiserver's negotiation package,
// whose module would bring the server's metrics and tracing along): the Accept header's
// clauses, best first (goautoneg), each against the media types served in their order (JSON,
// YAML, protobuf), with the parameters a clause may carry: as, g and v ask for another kind of
// answer (a meta.k8s.io Table, PartialObjectMetadata or PartialObjectMetadataList, v1 or
// v1beta1), stream=watch for a watch's stream. A clause the endpoint cannot meet is skipped;
// none met is a 406. Errors are answered in the media type negotiated without a transform.

const (
	jsonType = "application/json"
	yamlType = "application/yaml"
)

// servedMediaTypes are the media types answers take, kube-apiserver's order (the first is the
// default).
var servedMediaTypes = []string{jsonType, yamlType, protobufType}

// The kinds of answer a client may ask for instead of the object (the as parameter).
const (
	asTable       = "Table"
	asPartial     = "PartialObjectMetadata"
	asPartialList = "PartialObjectMetadataList"
)

// output is a negotiated answer: its media type and, when the client asked for one, the
// meta.k8s.io kind and version it gets instead of the object.
type output struct {
	mediaType string
	as        string // "", asTable, asPartial or asPartialList
	version   string // the meta.k8s.io version of as: v1 or v1beta1
}

// asAPIVersion is the apiVersion of the answer's kind.
func (o output) asAPIVersion() string { return metav1.GroupName + "/" + o.version }

// negotiate picks the answer to a request for objects of k from its Accept header; stream says
// the answer is a watch's stream (YAML has none). No acceptable answer is a 406 listing the
// media types served.
func negotiate(r *http.Request, k *kinds.Kind, stream bool) (output, error) {
	out, ok := negotiateFor(r.Header.Get("Accept"), func(mediaType string, o output) bool {
		switch o.as {
		case "":
			// Custom resources have no protobuf form; their metadata and Tables do.
			return mediaType != protobufType || k.Protobuf
		case asTable:
			return mediaType != protobufType
		}
		return true
	})
	if !ok {
		return out, notAcceptable(servedMediaTypes)
	}
	if stream && out.mediaType == yamlType {
		return out, notAcceptable([]string{jsonType + ";stream=watch", protobufType + ";stream=watch"})
	}
	return out, nil
}

// negotiateStatus is the media type of an error's Status: negotiated without a transform, JSON
// when nothing else is acceptable.
func negotiateStatus(r *http.Request) string {
	out, ok := negotiateFor(r.Header.Get("Accept"), func(_ string, o output) bool { return o.as == "" })
	if !ok {
		return jsonType
	}
	return out.mediaType
}

// negotiateFor returns the first answer, clause by clause (best first) and media type by media
// type, that allows says the endpoint can give; ok is false when there is none.
func negotiateFor(accept string, allows func(mediaType string, o output) bool) (output, bool) {
	if accept == "" {
		return output{mediaType: jsonType}, true
	}
	for _, clause := range goautoneg.ParseAccept(accept) {
		for _, mt := range servedMediaTypes {
			typ, sub, _ := strings.Cut(mt, "/")
			if !(clause.Type == typ && (clause.SubType == sub || clause.SubType == "*") || clause.Type == "*" && clause.SubType == "*") {
				continue
			}
			o, ok := clauseOutput(clause.Params, mt)
			if ok && allows(mt, o) {
				return o, true
			}
		}
	}
	return output{}, false
}

// clauseOutput reads a clause's parameters for media type mt; ok is false when they ask for
// what no endpoint gives (another group or version, another kind than the three, a stream
// other than watch or of YAML, another server version).
func clauseOutput(params map[string]string, mt string) (output, bool) {
	o := output{mediaType: mt}
	asked := false
	var group string
	for k, v := range params {
		switch k {
		case "as":
			o.as, asked = v, true
		case "g":
			group, asked = v, true
		case "v":
			o.version, asked = v, true
		case "stream":
			if v != "" && (v != "watch" || mt == yamlType) {
				return o, false
			}
		case "sv":
			if v != "" && v != "v1" {
				return o, false
			}
		}
	}
	if !asked {
		return o, true
	}
	if group != metav1.GroupName || o.version != "v1" && o.version != "v1beta1" {
		return o, false
	}
	switch o.as {
	case asTable, asPartial, asPartialList:
		return o, true
	}
	return o, false
}

// notAcceptable is the 406 of a request whose Accept header no answer meets.
func notAcceptable(mediaTypes []string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotAcceptable,
		Reason: metav1.StatusReasonNotAcceptable, Message: "only the following media types are accepted: " + strings.Join(mediaTypes, ", ")}}
}

// wrongShape is the 406 of a metadata-only request whose form (one object or a list) is not
// the answer's.
func wrongShape(as string, k *kinds.Kind, list bool) error {
	msg := fmt.Sprintf("you requested %s, but the requested object is not a list (%s)", as, internalType(k, list))
	if list {
		msg = fmt.Sprintf("you requested %s, but the requested object is a list (%s)", as, internalType(k, list))
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotAcceptable,
		Reason: metav1.StatusReasonNotAcceptable, Message: msg}}
}

// internalType is the Go type kube-apiserver holds k's object (or list) in, which its 406s
// name: its internal API package ("core" for the core group and events.k8s.io, the group's
// first label otherwise), or unstructured for custom resources.
func internalType(k *kinds.Kind, list bool) string {
	pkg, kind := "unstructured", "Unstructured"
	if k.BuiltIn() {
		pkg, _, _ = strings.Cut(k.Group, ".")
		if k.Group == "" || k.Group == "events.k8s.io" {
			pkg = "core"
		}
		kind = k.Kind
	}
	if list {
		kind += "List"
	}
	return "*" + pkg + "." + kind
}
