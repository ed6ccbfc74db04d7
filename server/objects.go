package server

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Handlers for custom resources. Each parses, makes one HTTP-free call and answers.

func (s *Server) getObject(c *echo.Context) error {
	t, err := s.parseTarget(c)
	if err != nil {
		return err
	}
	switch t.sub {
	case "history":
		return s.history(c, t)
	case "reconcile":
		return echo.ErrMethodNotAllowed
	}
	if t.sub == "" && wantsTable(c.Request()) {
		o, err := s.cfg.Store.Get(c.Request().Context(), t.key)
		if err != nil {
			return err
		}
		return s.answerTable(c, t, []*cache.Object{o}, metav1.ListMeta{ResourceVersion: formatRV(o.ResourceVersion())})
	}
	body, err := s.get(c.Request().Context(), t)
	if err != nil {
		return err
	}
	return writeRaw(c, http.StatusOK, body)
}

func (s *Server) listObjects(c *echo.Context) error {
	t, err := s.parseTarget(c)
	if err != nil {
		return err
	}
	if isWatch(c.Request()) {
		return s.kubeWatch(c, t)
	}
	q, err := parseListQuery(c.Request().URL.Query(), s.selectable(t))
	if err != nil {
		return err
	}
	items, meta, err := s.list(c.Request().Context(), t, q)
	if err != nil {
		return err
	}
	if wantsTable(c.Request()) {
		return s.answerTable(c, t, items, meta)
	}
	return answerList(c, t.kind.GroupVersion(), t.kind.ListKind, meta, items)
}

// parseWrite parses what every write handler needs: the target, the write options and the body.
func (s *Server) parseWrite(c *echo.Context) (target, writeOptions, []byte, error) {
	t, err := s.parseTarget(c)
	if err != nil {
		return t, writeOptions{}, nil, err
	}
	if t.sub == "history" || t.sub == "reconcile" {
		return t, writeOptions{}, nil, echo.ErrMethodNotAllowed
	}
	o, err := parseWriteOptions(c)
	if err != nil {
		return t, o, nil, err
	}
	body, err := readBody(c)
	return t, o, body, err
}

func (s *Server) createObject(c *echo.Context) error {
	t, o, body, err := s.parseWrite(c)
	if err != nil {
		return err
	}
	obj, dups, err := s.decodeObject(t, mediaType(c.Request()), body, o.fieldValidation)
	if err != nil {
		return err
	}
	res, err := s.create(c.Request().Context(), t, obj, o)
	if err != nil {
		return err
	}
	setWarnings(c, append(dups, res.warnings...))
	return writeRaw(c, http.StatusCreated, res.obj.Raw())
}

func (s *Server) updateObject(c *echo.Context) error {
	t, o, body, err := s.parseWrite(c)
	if err != nil {
		return err
	}
	obj, dups, err := s.decodeObject(t, mediaType(c.Request()), body, o.fieldValidation)
	if err != nil {
		return err
	}
	res, err := s.update(c.Request().Context(), t, o, putMutation(t, obj))
	if err != nil {
		return err
	}
	res.warnings = append(dups, res.warnings...)
	return s.answerWrite(c, t, res, http.StatusOK)
}

// putMutation replaces the current object with the PUT body; the body's resourceVersion, when
// present, is the client's precondition.
func putMutation(t target, body map[string]any) mutateFunc {
	return func(cur map[string]any) (map[string]any, bool, error) {
		if t.sub == "scale" {
			return fromScale(t, cur, body)
		}
		md, err := metadata(body)
		if err != nil {
			return nil, false, err
		}
		return deepCopy(body), stringOf(md["resourceVersion"]) != "", nil
	}
}

func (s *Server) patchObject(c *echo.Context) error {
	t, o, body, err := s.parseWrite(c)
	if err != nil {
		return err
	}
	res, created, err := s.patch(c.Request().Context(), t, mediaType(c.Request()), body, o)
	if err != nil {
		return err
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	return s.answerWrite(c, t, res, code)
}

// answerWrite sends the stored object (or its Scale view) with the write's warnings.
func (s *Server) answerWrite(c *echo.Context, t target, res writeResult, code int) error {
	setWarnings(c, res.warnings)
	if t.sub == "scale" {
		obj, err := res.obj.Decode()
		if err != nil {
			return err
		}
		return c.JSON(code, scaleOf(t, obj))
	}
	return writeRaw(c, code, res.obj.Raw())
}

// deleteOptions is the part of metav1.DeleteOptions opemu honours.
type deleteOptions struct {
	Preconditions *struct {
		UID             *string `json:"uid"`
		ResourceVersion *string `json:"resourceVersion"`
	} `json:"preconditions"`
	DryRun            []string `json:"dryRun"`
	PropagationPolicy *string  `json:"propagationPolicy"`
}

func (s *Server) deleteObject(c *echo.Context) error {
	t, o, body, err := s.parseWrite(c)
	if err != nil {
		return err
	}
	pre, o, err := s.parseDeleteOptions(c, body, o)
	if err != nil {
		return err
	}
	obj, removed, err := s.delete(c.Request().Context(), t, pre, o)
	if err != nil {
		return err
	}
	if !removed {
		return writeRaw(c, http.StatusOK, obj.Raw())
	}
	return c.JSON(http.StatusOK, &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Details:  &metav1.StatusDetails{Name: t.key.Name, Group: t.kind.Group, Kind: t.kind.Plural, UID: apiUID(obj.UID())},
	})
}

// deleteCollection deletes every object of the list selected by the query (labelSelector,
// fieldSelector) and answers them as a <Kind>List: removed ones in their last state, ones held
// by finalizers marked for deletion.
func (s *Server) deleteCollection(c *echo.Context) error {
	t, o, body, err := s.parseWrite(c)
	if err != nil {
		return err
	}
	pre, o, err := s.parseDeleteOptions(c, body, o)
	if err != nil {
		return err
	}
	q, err := parseListQuery(c.Request().URL.Query(), s.selectable(t))
	if err != nil {
		return err
	}
	q.limit, q.cont = 0, nil
	objs, meta, err := s.deleteAll(c.Request().Context(), t, q, pre, o)
	if err != nil {
		return err
	}
	return answerList(c, t.kind.GroupVersion(), t.kind.ListKind, meta, objs)
}

// parseDeleteOptions reads an optional DeleteOptions body (JSON or protobuf).
func (s *Server) parseDeleteOptions(c *echo.Context, body []byte, o writeOptions) (cache.Preconditions, writeOptions, error) {
	var pre cache.Preconditions
	if len(body) > 0 {
		var opts deleteOptions
		if mediaType(c.Request()) == protobufType {
			m, err := s.decodeProtobuf(body)
			if err != nil {
				return pre, o, err
			}
			if body, err = json.Marshal(m); err != nil {
				return pre, o, err
			}
		}
		if err := json.Unmarshal(body, &opts); err != nil {
			return pre, o, badRequest("the body of the request is not valid DeleteOptions: %v", err)
		}
		if p := opts.Preconditions; p != nil {
			if p.UID != nil {
				pre.UID = *p.UID
			}
			if p.ResourceVersion != nil {
				pre.ResourceVersion = *p.ResourceVersion
			}
		}
		for _, d := range opts.DryRun {
			if d != "All" {
				return pre, o, badRequest("Invalid dryRun value %q: only \"All\" is supported", d)
			}
			o.dryRun = true
		}
	}
	return pre, o, nil
}

// answerTable sends objs as a meta.k8s.io/v1 Table (kubectl get).
func (s *Server) answerTable(c *echo.Context, t target, objs []*cache.Object, meta metav1.ListMeta) error {
	include := c.QueryParam("includeObject")
	if err := validIncludeObject(include); err != nil {
		return err
	}
	tbl, err := table(t.kind, objs, meta, include, true, s.cfg.Clock.Now())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, tbl)
}
