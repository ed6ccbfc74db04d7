package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/internal/yamlsize"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// parseTarget resolves the URL's group, version, resource, namespace, name and subresource.
// Parsing only: a resource not served, or a path that does not fit the kind's scope, is the 404
// kube-apiserver gives such a path (notServed); a subresource the kind does not have is a 404
// too, naming the object for a custom resource as the apiextensions-apiserver does.
func (s *Server) parseTarget(c *echo.Context) (registry.Target, error) {
	group, version, resource := c.Param("group"), c.Param("version"), c.Param("resource")
	k, ok := s.cfg.Kinds.Lookup(group, version, resource)
	if !ok {
		// A resource this server does not serve is not a missing object: kube-apiserver answers
		// its generic 404, which clients read as "not served" (RESTMapper: no matches for kind).
		return registry.Target{}, s.notServed(group)
	}
	if k.Warning != "" {
		s.setWarnings(c, []string{k.Warning}) // a deprecated version: every request is told
	}
	t := registry.Target{Kind: k, Sub: c.Param("sub")}
	gr := k.GroupResource() // a view's objects are stored as another kind's
	t.Key = cache.Key{Group: gr.Group, Resource: gr.Resource, Namespace: c.Param("namespace"), Name: c.Param("name")}
	if (!k.Namespaced && t.Key.Namespace != "") || (k.Namespaced && t.Key.Name != "" && t.Key.Namespace == "") {
		if k.BuiltIn() {
			return registry.Target{}, echo.ErrNotFound
		}
		return registry.Target{}, errPageNotFound
	}
	switch t.Sub {
	case "":
	case "status", "scale":
		if (t.Sub == "status" && !k.Status) || (t.Sub == "scale" && k.Scale == nil) {
			return registry.Target{}, noSubresource(k, t.Key.Name)
		}
	case "finalize":
		// A Namespace's: kube-apiserver serves only its update.
		if !k.Finalize {
			return registry.Target{}, echo.ErrNotFound
		}
		if c.Request().Method != http.MethodPut {
			return registry.Target{}, echo.ErrMethodNotAllowed
		}
	case "token":
		// A ServiceAccount's TokenRequest (tokenrequest.go): created only.
		if k.Group != "" || k.Plural != "serviceaccounts" {
			return registry.Target{}, noSubresource(k, t.Key.Name)
		}
		if c.Request().Method != http.MethodPost {
			return registry.Target{}, echo.ErrMethodNotAllowed
		}
	case "binding", "eviction":
		if !k.Schedulable {
			return registry.Target{}, noSubresource(k, t.Key.Name)
		}
		if c.Request().Method != http.MethodPost {
			return registry.Target{}, echo.ErrMethodNotAllowed
		}
	case "history", "reconcile":
		// Any kind: a Controller (controllers.opemu.dev) may reconcile built-in kinds too; the
		// handler says when none does.
		if k.Conversion != nil {
			return registry.Target{}, echo.ErrNotFound
		}
	default:
		return registry.Target{}, noSubresource(k, t.Key.Name)
	}
	return t, nil
}

// noSubresource is the 404 of a subresource k does not have: the generic one for a built-in
// kind, the object's NotFound for a custom resource (whether the object exists or not).
func noSubresource(k *kinds.Kind, name string) error {
	if k.BuiltIn() {
		return echo.ErrNotFound
	}
	return apierrors.NewNotFound(schema.GroupResource{Group: k.Group, Resource: k.Plural}, name)
}

// readBody reads the whole request body within the request deadline and the body limit.
func readBody(c *echo.Context) ([]byte, error) {
	r := c.Request()
	if r.Body == nil {
		return nil, nil
	}
	if dl, ok := r.Context().Deadline(); ok {
		_ = http.NewResponseController(c.Response()).SetReadDeadline(dl)
	}
	if n := r.ContentLength; n > 0 && n <= presizedBody {
		// The usual small body, read at its size in one allocation (net/http ends the body
		// at Content-Length; the body limit still applies through r.Body).
		b := make([]byte, n)
		if _, err := io.ReadFull(r.Body, b); err != nil {
			return nil, bodyError(err)
		}
		noteBody(c, b)
		return b, nil
	}
	var buf bytes.Buffer
	if _, err := io.Copy(&buf, r.Body); err != nil {
		return nil, bodyError(err)
	}
	noteBody(c, buf.Bytes())
	return buf.Bytes(), nil
}

// checkYAMLBody refuses (413) a YAML body (create, update, delete options, server-side apply)
// whose aliases would expand it beyond twice MAX_BODY of JSON, the most any request may make of
// an object (as a patched object), before a decoder expands them: converting YAML to JSON
// writes each alias out in full, so 500 aliases of a 2 MB scalar took 3.45 GB.
func (s *Server) checkYAMLBody(r *http.Request, body []byte) error {
	switch mediaType(r) {
	case "application/yaml", "application/apply-patch+yaml":
	default:
		return nil
	}
	limit := 2 * int(s.cfg.MaxBody)
	if _, over := yamlsize.Measure(body, limit); over {
		return apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("the aliases of the YAML body expand it to more than %d bytes of JSON, twice the body limit", limit))
	}
	return nil
}

// presizedBody is the largest Content-Length readBody allocates for before the body arrives;
// larger bodies grow as they are read, so a client cannot make the server hold memory it has
// only announced.
const presizedBody = 64 << 10

// mediaType returns the request's Content-Type without parameters ("" when absent).
func mediaType(r *http.Request) string {
	ct := r.Header.Get("Content-Type")
	if ct == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return strings.ToLower(strings.TrimSpace(strings.Split(ct, ";")[0]))
	}
	return mt
}

// routePatchTypes are the patch media types kube-apiserver's routes of built-in kinds take.
var routePatchTypes = []string{"application/json-patch+json", "application/merge-patch+json", "application/strategic-merge-patch+json", "application/apply-patch+yaml"}

// patchType is a PATCH's media type as kube-apiserver reads it: the Content-Type as sent (its
// case too) up to its parameters.
func patchType(r *http.Request) string {
	ct, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	return strings.TrimSpace(ct)
}

// objectMediaTypes are the body formats kube-apiserver lists in a 415 of a create or update:
// its serializers' (custom resources take no protobuf, but their 415 lists it too).
const objectMediaTypes = "application/json, application/yaml, application/vnd.kubernetes.protobuf"

// decodeObject decodes a create or update body (JSON, YAML, or protobuf for built-in kinds) as
// kube-apiserver does (registry.DecodeBody), marking o as decoded. The warnings are
// fieldValidation's, to be sent whatever becomes of the write.
func (s *Server) decodeObject(t registry.Target, contentType string, body []byte, o *registry.Options) (map[string]any, []string, error) {
	format := registry.JSONBody
	switch contentType {
	case protobufType:
		if !t.Kind.Protobuf {
			return nil, nil, registry.UnsupportedMediaType(objectMediaTypes)
		}
		obj, err := s.decodeProtobuf(body)
		if err != nil {
			return nil, nil, err
		}
		// A protobuf body holds only what its Go type does: decoded, it is the usual JSON body.
		if body, err = json.Marshal(obj); err != nil {
			return nil, nil, err
		}
	case "", "application/json":
	case "application/yaml":
		format = registry.YAMLBody
	default:
		return nil, nil, registry.UnsupportedMediaType(objectMediaTypes)
	}
	return registry.DecodeBody(t, body, format, o)
}

// The options of a write, as kube-apiserver names them in its 422s.
const (
	createOpts = "CreateOptions"
	updateOpts = "UpdateOptions"
	patchOpts  = "PatchOptions"
	deleteOpts = "DeleteOptions"
)

// parseWriteOptions reads the query parameters of a write (kind is its options' kind) as
// kube-apiserver does, with apimachinery's parameter codec and its validation of them (a 422
// naming the options), and who is writing. force keeps opemu's boolean spellings (queryBool).
func parseWriteOptions(c *echo.Context, kind string) (registry.Options, error) {
	r := c.Request()
	q := r.URL.Query()
	o := registry.Options{FieldValidation: "Warn", UserAgent: r.UserAgent()}
	if u, ok := UserFrom(r.Context()); ok {
		o.User, o.UserUID, o.UserGroups = u.Name, u.UID, u.Groups
	}
	if len(q) == 0 {
		return o, nil // no options: the codec would decode none, which validate clean
	}
	var errs field.ErrorList
	switch kind {
	case createOpts, updateOpts, patchOpts:
		var opts metav1.PatchOptions // the fields of all three (force only counts for a PATCH)
		if err := metainternalversionscheme.ParameterCodec.DecodeParameters(q, metav1.SchemeGroupVersion, &opts); err != nil {
			return o, apierrors.NewBadRequest(err.Error())
		}
		if _, ok := q["force"]; ok && kind == patchOpts {
			force, err := queryBool(q, "force")
			if err != nil {
				return o, err
			}
			opts.Force, o.Force = &force, force
		}
		switch kind {
		case createOpts:
			errs = metav1validation.ValidateCreateOptions(&metav1.CreateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager, FieldValidation: opts.FieldValidation})
		case updateOpts:
			errs = metav1validation.ValidateUpdateOptions(&metav1.UpdateOptions{DryRun: opts.DryRun, FieldManager: opts.FieldManager, FieldValidation: opts.FieldValidation})
		default:
			errs = metav1validation.ValidatePatchOptions(&opts, types.PatchType(mediaType(r)))
		}
		o.DryRun, o.FieldManager = len(opts.DryRun) > 0, opts.FieldManager
		if opts.FieldValidation != "" {
			o.FieldValidation = opts.FieldValidation
		}
	default:
		// A DELETE's other options are its body's, or the query's (parseDeleteOptions).
		errs = metav1validation.ValidateDryRun(field.NewPath("dryRun"), q["dryRun"])
		o.DryRun = len(q["dryRun"]) > 0
	}
	if len(errs) > 0 {
		return o, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: kind}, "", errs)
	}
	return o, nil
}

// writeRaw sends pre-encoded JSON.
func writeRaw(c *echo.Context, code int, body []byte) error {
	return c.Blob(code, "application/json", body)
}
