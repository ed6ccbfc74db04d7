package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// toStatus maps any error a handler returns to the Kubernetes Status the client gets. It is
// the only place errors become HTTP answers.
func (s *Server) toStatus(err error) *metav1.Status {
	var st metav1.Status
	var apiStatus apierrors.APIStatus
	var cerr *cache.Error
	switch {
	case errors.As(err, &apiStatus):
		st = apiStatus.Status()
	case errors.As(err, &cerr):
		st = cacheStatus(cerr, s.cfg.Kinds)
	case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
		// A request whose context ended before its work did (its deadline passed, or its
		// client left): kube-apiserver's finisher answers 504 with the context's error.
		st = apierrors.NewTimeoutError("request did not complete within requested timeout - "+err.Error(), 0).ErrStatus
	case errors.Is(err, echo.ErrNotFound):
		// kube-apiserver's answer for a route or resource it does not serve: "the server could
		// not find the requested resource" with empty details.
		st = apierrors.NewGenericServerResponse(http.StatusNotFound, "", schema.GroupResource{}, "", "", 0, false).ErrStatus
	case errors.Is(err, echo.ErrMethodNotAllowed):
		st = apierrors.NewMethodNotSupported(schema.GroupResource{}, "").ErrStatus
		st.Message = "the server does not allow this method on the requested resource"
		st.Details = &metav1.StatusDetails{}
	default:
		var maxErr *http.MaxBytesError
		if errors.As(err, &maxErr) {
			st = apierrors.NewRequestEntityTooLargeError(fmt.Sprintf("limit is %d", maxErr.Limit)).ErrStatus
			break
		}
		code := echo.StatusCode(err)
		if code == 0 {
			code = http.StatusInternalServerError
		}
		st = apierrors.NewGenericServerResponse(code, "", schema.GroupResource{}, "", err.Error(), 0, false).ErrStatus
		if code == http.StatusInternalServerError {
			st.Message = "Internal error occurred: " + err.Error()
		}
	}
	st.Kind, st.APIVersion = "Status", "v1"
	st.Status = metav1.StatusFailure
	return &st
}

// cacheStatus words a store error as the kube-apiserver would for the same failure. Its details
// name the object as kube-apiserver's do: by resource (404, 409) or, for a 422, by the group and
// Kind served (apierrors.NewInvalid), found in served.
func cacheStatus(e *cache.Error, served *kinds.Registry) metav1.Status {
	gr := schema.GroupResource{Group: e.Key.Group, Resource: e.Key.Resource}
	name := e.Key.Name
	switch {
	case errors.Is(e, cache.ErrNotFound):
		return apierrors.NewNotFound(gr, name).ErrStatus
	case errors.Is(e, cache.ErrAlreadyExists):
		return apierrors.NewAlreadyExists(gr, name).ErrStatus
	case errors.Is(e, cache.ErrConflict):
		return apierrors.NewConflict(gr, name, errors.New(e.Message)).ErrStatus
	case errors.Is(e, cache.ErrGone):
		return apierrors.NewResourceExpired(e.Message).ErrStatus
	case errors.Is(e, cache.ErrForbidden):
		return apierrors.NewForbidden(gr, name, errors.New(e.Message)).ErrStatus
	case errors.Is(e, cache.ErrInvalid):
		path := field.NewPath("metadata")
		if e.Field != "" {
			path = field.NewPath(e.Field)
		}
		return apierrors.NewInvalid(groupKind(served, e.Key.GroupResource()), name,
			field.ErrorList{field.Forbidden(path, e.Message)}).ErrStatus
	case errors.Is(e, cache.ErrClosed):
		return apierrors.NewServiceUnavailable("the server is shutting down").ErrStatus
	case errors.Is(e, cache.ErrUnavailable):
		return apierrors.NewServiceUnavailable(e.Message).ErrStatus
	case errors.Is(e, cache.ErrTimeout):
		return apierrors.NewTimeoutError(e.Message, 1).ErrStatus
	case errors.Is(e, cache.ErrTooLarge):
		return apierrors.NewRequestEntityTooLargeError(e.Message).ErrStatus
	}
	return apierrors.NewInternalError(e).ErrStatus
}

// groupKind is the group and Kind served as gr; the resource stands for the Kind of a resource
// no longer served (its CRD went during the request).
func groupKind(served *kinds.Registry, gr cache.GroupResource) schema.GroupKind {
	if k, ok := served.Resource(gr); ok {
		return schema.GroupKind{Group: k.Group, Kind: k.Kind}
	}
	return schema.GroupKind{Group: gr.Group, Kind: gr.Resource}
}

// errPageNotFound is the 404 of a path outside the API kube-apiserver builds in (an unknown
// group, a CRD group's unknown version or resource, a path no handler serves): the plain-text
// page of Go's http.NotFound, as kube-apiserver answers it, not a Status.
var errPageNotFound = errors.New("404 page not found")

// errorHandler is the one echo.HTTPErrorHandler: every failure leaves as a Status (but
// errPageNotFound, which leaves as kube-apiserver's plain-text page).
func (s *Server) errorHandler(c *echo.Context, err error) {
	if resp, _ := echo.UnwrapResponse(c.Response()); resp != nil && resp.Committed {
		return
	}
	if errors.Is(err, errPageNotFound) {
		http.NotFound(c.Response(), c.Request())
		return
	}
	st := s.toStatus(err)
	if st.Code == http.StatusInternalServerError {
		s.log.Error("internal error", "method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
	}
	// As kube-apiserver: a Status that says when to retry says it in Retry-After too.
	if st.Details != nil && st.Details.RetryAfterSeconds > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int(st.Details.RetryAfterSeconds)))
	}
	if werr := writeStatus(c, st); werr != nil {
		s.log.Debug("writing error response", "err", werr)
	}
}

// badRequest is a 400 Status error with msg.
func badRequest(format string, args ...any) error {
	return apierrors.NewBadRequest(fmt.Sprintf(format, args...))
}

func tooManyRequests() error {
	return apierrors.NewTooManyRequests("too many requests in flight, please try again later", 1)
}
