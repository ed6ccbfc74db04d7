package server

import (
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/registry"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversionscheme "k8s.io/apimachinery/pkg/apis/meta/internalversion/scheme"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Handlers for custom resources. Each parses, makes one HTTP-free call and answers.

func (s *Server) getObject(c *echo.Context) error {
	t, err := s.parseTarget(c)
	if err != nil {
		return err
	}
	switch t.Sub {
	case "history":
		return s.history(c, t)
	case "reconcile":
		return echo.ErrMethodNotAllowed
	}
	out, err := negotiate(c.Request(), t.Kind, false)
	if err != nil {
		return err
	}
	rv := c.QueryParam("resourceVersion")
	if _, err := cache.ParseResourceVersion(rv); err != nil {
		return unparsableResourceVersion(rv, err)
	}
	o, err := s.cfg.Registry.Get(c.Request().Context(), t, rv)
	if err != nil {
		return err
	}
	return s.answerObject(c, http.StatusOK, t, o, out)
}

func (s *Server) listObjects(c *echo.Context) error {
	t, err := s.parseTarget(c)
	if err != nil {
		return err
	}
	watch, err := queryBool(c.Request().URL.Query(), "watch")
	if err != nil {
		return err
	}
	if watch {
		return s.kubeWatch(c, t, false)
	}
	out, err := negotiate(c.Request(), t.Kind, false)
	if err != nil {
		return err
	}
	q, err := listQuery(c.Request().URL.Query(), t)
	if err != nil {
		return err
	}
	items, meta, err := s.cfg.Registry.List(c.Request().Context(), t, q)
	if err != nil {
		return err
	}
	return s.answerList(c, t, meta, items, out)
}

// watchObjects serves the /watch/ paths: a watch of the collection, or of one object by name.
func (s *Server) watchObjects(c *echo.Context) error {
	t, err := s.parseTarget(c)
	if err != nil {
		return err
	}
	if t.Sub != "" {
		return echo.ErrNotFound
	}
	return s.kubeWatch(c, t, true)
}

// answerObject sends o as the client reads t (registry.View) in the negotiated form: the
// object, its PartialObjectMetadata or a one-row Table (not for /scale, whose answer is
// always the Scale).
func (s *Server) answerObject(c *echo.Context, code int, t registry.Target, o *cache.Object, out output) error {
	noteObject(c, o)
	if t.Sub != "scale" {
		switch out.as {
		case asTable:
			return s.answerTable(c, code, t, []*cache.Object{o}, metav1.ListMeta{ResourceVersion: formatRV(o.ResourceVersion())}, out)
		case asPartialList:
			return wrongShape(asPartialList, t.Kind, false)
		}
	}
	body, err := registry.View(t, o)
	if err != nil {
		return err
	}
	if out.as == asPartial && t.Sub != "scale" {
		if body, err = appendPartial(nil, body, out.version); err != nil {
			return err
		}
		return writeAs(c, code, out.mediaType, body, typedAs[metav1.PartialObjectMetadata]())
	}
	return writeAs(c, code, out.mediaType, body, s.cfg.Kinds.Typed)
}

// parseWrite parses what every write handler needs: the target, the write options (of kind
// optionsKind), the answer's form and the body.
func (s *Server) parseWrite(c *echo.Context, optionsKind string) (registry.Target, registry.Options, output, []byte, error) {
	t, err := s.parseTarget(c)
	if err != nil {
		return t, registry.Options{}, output{}, nil, err
	}
	if t.Sub == "history" || t.Sub == "reconcile" {
		return t, registry.Options{}, output{}, nil, echo.ErrMethodNotAllowed
	}
	if c.Request().Method == http.MethodPatch && t.Kind.BuiltIn() && !slices.Contains(routePatchTypes, patchType(c.Request())) {
		// kube-apiserver's routes of built-in kinds take these only; go-restful refuses the
		// rest before any handler runs. Custom resources' handler lists what they take.
		return t, registry.Options{}, output{}, nil, apierrors.NewGenericServerResponse(http.StatusUnsupportedMediaType, "", schema.GroupResource{}, "", "415: Unsupported Media Type", 0, false)
	}
	out, err := negotiate(c.Request(), t.Kind, false)
	if err != nil {
		return t, registry.Options{}, out, nil, err
	}
	o, err := parseWriteOptions(c, optionsKind)
	if err != nil {
		return t, o, out, nil, err
	}
	body, err := readBody(c)
	if err == nil {
		err = s.checkYAMLBody(c.Request(), body)
	}
	return t, o, out, body, err
}

func (s *Server) createObject(c *echo.Context) error {
	t, o, out, body, err := s.parseWrite(c, createOpts)
	if err != nil {
		return err
	}
	obj, warnings, err := s.decodeObject(t, mediaType(c.Request()), body, &o)
	s.setWarnings(c, warnings)
	if err != nil {
		return err
	}
	res, err := s.cfg.Registry.Create(c.Request().Context(), t, obj, o)
	if err != nil {
		return err
	}
	return s.answerWrite(c, t, res, out, http.StatusCreated)
}

func (s *Server) updateObject(c *echo.Context) error {
	t, o, out, body, err := s.parseWrite(c, updateOpts)
	if err != nil {
		return err
	}
	obj, warnings, err := s.decodeObject(t, mediaType(c.Request()), body, &o)
	s.setWarnings(c, warnings)
	if err != nil {
		return err
	}
	res, err := s.cfg.Registry.Update(c.Request().Context(), t, obj, o)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if res.Created {
		code = http.StatusCreated
	}
	return s.answerWrite(c, t, res, out, code)
}

func (s *Server) patchObject(c *echo.Context) error {
	t, o, out, body, err := s.parseWrite(c, patchOpts)
	if err != nil {
		return err
	}
	res, err := s.cfg.Registry.Patch(c.Request().Context(), t, patchType(c.Request()), body, o)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if res.Created {
		code = http.StatusCreated
	}
	return s.answerWrite(c, t, res, out, code)
}

// answerWrite sends the stored object (or its Scale view) with the write's warnings.
func (s *Server) answerWrite(c *echo.Context, t registry.Target, res registry.Result, out output, code int) error {
	s.setWarnings(c, res.Warnings)
	return s.answerObject(c, code, t, res.Object, out)
}

func (s *Server) deleteObject(c *echo.Context) error {
	t, o, out, body, err := s.parseWrite(c, deleteOpts)
	if err != nil {
		return err
	}
	pre, o, err := s.parseDeleteOptions(c, body, o)
	if err != nil {
		return err
	}
	s.warnDelete(c, t, o)
	obj, removed, err := s.cfg.Registry.Delete(c.Request().Context(), t, pre, o)
	if err != nil {
		return err
	}
	if !removed || t.Kind.ReturnDeletedObject {
		return s.answerObject(c, http.StatusOK, t, obj, out)
	}
	return writeValueAs(c, http.StatusOK, out.mediaType, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: t.Key.Name, Group: t.Kind.Group, Kind: t.Kind.Plural, UID: types.UID(obj.UID())},
	}, typedAs[metav1.Status]())
}

// deleteCollection deletes every object of the list selected by the query (labelSelector,
// fieldSelector, limit, continue) and answers them as the list found them (a <Kind>List).
func (s *Server) deleteCollection(c *echo.Context) error {
	t, o, out, body, err := s.parseWrite(c, deleteOpts)
	if err != nil {
		return err
	}
	if !hasVerb(t.Kind, "deletecollection") {
		return echo.ErrMethodNotAllowed
	}
	pre, o, err := s.parseDeleteOptions(c, body, o)
	if err != nil {
		return err
	}
	q, err := listQuery(c.Request().URL.Query(), t)
	if err != nil {
		return err
	}
	s.warnDelete(c, t, o)
	objs, meta, err := s.cfg.Registry.DeleteCollection(c.Request().Context(), t, q, pre, o)
	if err != nil {
		return err
	}
	return s.answerList(c, t, meta, objs, out)
}

// warnDelete sends the kind's warning for a delete that names no propagation policy (a
// batch/v1 Job's pods are orphaned by default).
func (s *Server) warnDelete(c *echo.Context, t registry.Target, o registry.Options) {
	if o.PropagationPolicy == "" && t.Kind.DeleteWarning != "" {
		s.setWarnings(c, []string{t.Kind.DeleteWarning})
	}
}

// parseDeleteOptions reads an optional DeleteOptions body (JSON, YAML or protobuf) as
// kube-apiserver does, by apimachinery's codecs of the meta.k8s.io types (meta.k8s.io/v1
// DeleteOptions by default; what it cannot decode a 400 in their words), or without a body the
// query's propagationPolicy and orphanDependents.
func (s *Server) parseDeleteOptions(c *echo.Context, body []byte, o registry.Options) (cache.Preconditions, registry.Options, error) {
	var pre cache.Preconditions
	opts := &metav1.DeleteOptions{}
	if len(body) == 0 {
		q := c.Request().URL.Query()
		if v, ok := q["propagationPolicy"]; ok && len(v) > 0 {
			p := metav1.DeletionPropagation(v[0])
			opts.PropagationPolicy = &p
		}
		if _, ok := q["orphanDependents"]; ok {
			b, err := queryBool(q, "orphanDependents")
			if err != nil {
				return pre, o, err
			}
			opts.OrphanDependents = &b
		}
		if v, ok := q["gracePeriodSeconds"]; ok && len(v) > 0 {
			n, err := strconv.ParseInt(v[0], 10, 64)
			if err != nil {
				return pre, o, badRequest("gracePeriodSeconds: %q is not an integer", v[0])
			}
			opts.GracePeriodSeconds = &n
		}
	} else if err := decodeDeleteOptions(mediaType(c.Request()), body, opts); err != nil {
		return pre, o, err
	}
	if p := opts.Preconditions; p != nil {
		if p.UID != nil {
			pre.UID = string(*p.UID)
		}
		if p.ResourceVersion != nil {
			pre.ResourceVersion = *p.ResourceVersion
		}
	}
	for _, d := range opts.DryRun {
		if d != "All" {
			return pre, o, badRequest("Invalid dryRun value %q: only \"All\" is supported", d)
		}
		o.DryRun = true
	}
	policy, err := propagationPolicy(opts)
	o.PropagationPolicy, o.GracePeriodSeconds = policy, opts.GracePeriodSeconds
	return pre, o, err
}

// decodeDeleteOptions decodes a DeleteOptions body of the given media type into opts.
func decodeDeleteOptions(contentType string, body []byte, opts *metav1.DeleteOptions) error {
	codecs := metainternalversionscheme.Codecs
	if contentType == "" {
		contentType = runtime.ContentTypeJSON
	}
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), contentType)
	if !ok {
		accepted := make([]string, 0, 3)
		for _, i := range codecs.SupportedMediaTypes() {
			accepted = append(accepted, i.MediaType)
		}
		return registry.UnsupportedMediaType(strings.Join(accepted, ", "))
	}
	defaults := metav1.SchemeGroupVersion.WithKind("DeleteOptions")
	obj, _, err := codecs.DecoderToVersion(info.Serializer, defaults.GroupVersion()).Decode(body, &defaults, opts)
	if err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	if obj != opts {
		return apierrors.NewBadRequest("decoded object cannot be converted to DeleteOptions")
	}
	return nil
}

// propagationPolicy checks DeleteOptions' propagationPolicy and orphanDependents as
// kube-apiserver's ValidateDeleteOptions does (a 422 naming DeleteOptions) and returns the
// policy they ask for: orphanDependents true is Orphan, false Background; neither is "" (the
// object's own finalizers decide).
func propagationPolicy(opts *metav1.DeleteOptions) (metav1.DeletionPropagation, error) {
	path := field.NewPath("propagationPolicy")
	invalid := func(errs ...*field.Error) error {
		return apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: "DeleteOptions"}, "", errs)
	}
	switch {
	case opts.OrphanDependents != nil && opts.PropagationPolicy != nil:
		return "", invalid(field.Invalid(path, *opts.PropagationPolicy, "orphanDependents and deletionPropagation cannot be both set"))
	case opts.OrphanDependents != nil && *opts.OrphanDependents:
		return metav1.DeletePropagationOrphan, nil
	case opts.OrphanDependents != nil:
		return metav1.DeletePropagationBackground, nil
	case opts.PropagationPolicy == nil:
		return "", nil
	}
	switch p := *opts.PropagationPolicy; p {
	case metav1.DeletePropagationForeground, metav1.DeletePropagationBackground, metav1.DeletePropagationOrphan:
		return p, nil
	}
	return "", invalid(field.NotSupported(path, string(*opts.PropagationPolicy),
		[]string{string(metav1.DeletePropagationForeground), string(metav1.DeletePropagationBackground), string(metav1.DeletePropagationOrphan), "nil"}))
}
