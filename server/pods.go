package server

import (
	"encoding/json"
	"net/http"

	"github.com/labstack/echo/v5"
	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/registry"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// bindPod serves pods/<name>/binding: a v1 Binding assigns the Pod to a Node (a scheduler's
// write), answered with kube-apiserver's Success Status.
func (s *Server) bindPod(c *echo.Context) error {
	t, o, _, body, err := s.parseWrite(c, createOpts)
	if err != nil {
		return err
	}
	var b corev1.Binding
	if err := s.decodeSubresourceBody(c, body, &b); err != nil {
		return err
	}
	if b.Name != t.Key.Name {
		return apierrors.NewBadRequest("name in URL does not match name in Binding object")
	}
	if b.Target.Kind != "" && b.Target.Kind != "Node" {
		return apierrors.NewInternalError(errString("target.kind: Unsupported value: " + b.Target.Kind))
	}
	if b.Target.Name == "" {
		return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Message: "target.name: Required value"}}
	}
	if o.DryRun {
		_, err := s.cfg.Registry.Get(c.Request().Context(), t, "")
		if err != nil {
			return err
		}
		return success(c)
	}
	_, err = s.cfg.Registry.Bind(c.Request().Context(), t.Key, registry.Binding{
		Node: b.Target.Name, Annotations: b.Annotations, UID: string(b.UID), ResourceVersion: b.ResourceVersion,
	}, o)
	if err != nil {
		return err
	}
	return success(c)
}

// evictPod serves pods/<name>/eviction: a policy/v1 (or v1beta1) Eviction deletes the Pod
// when its PodDisruptionBudget allows (registry.Store.Evict), answered with kube-apiserver's
// Success Status.
func (s *Server) evictPod(c *echo.Context) error {
	t, o, _, body, err := s.parseWrite(c, createOpts)
	if err != nil {
		return err
	}
	var ev policyv1.Eviction
	if err := s.decodeSubresourceBody(c, body, &ev); err != nil {
		return err
	}
	if ev.Name != t.Key.Name {
		return apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	var pre cache.Preconditions
	if d := ev.DeleteOptions; d != nil {
		if d.Preconditions != nil {
			if d.Preconditions.UID != nil {
				pre.UID = string(*d.Preconditions.UID)
			}
			if d.Preconditions.ResourceVersion != nil {
				pre.ResourceVersion = *d.Preconditions.ResourceVersion
			}
		}
		o.GracePeriodSeconds = d.GracePeriodSeconds
		if len(d.DryRun) > 0 {
			o.DryRun = true
		}
		if d.PropagationPolicy != nil {
			o.PropagationPolicy = *d.PropagationPolicy
		}
	}
	if err := s.cfg.Registry.Evict(c.Request().Context(), t.Key, pre, o); err != nil {
		return err
	}
	return success(c)
}

// decodeSubresourceBody reads a JSON, YAML or protobuf body into v.
func (s *Server) decodeSubresourceBody(c *echo.Context, body []byte, v any) error {
	raw := body
	switch mediaType(c.Request()) {
	case protobufType:
		m, err := s.decodeProtobuf(body)
		if err != nil {
			return err
		}
		if raw, err = json.Marshal(m); err != nil {
			return err
		}
	case "application/yaml":
		var err error
		if raw, err = yaml.YAMLToJSON(body); err != nil {
			return apierrors.NewBadRequest(err.Error())
		}
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return apierrors.NewBadRequest(err.Error())
	}
	return nil
}

// success is kube-apiserver's answer to a binding or an eviction.
func success(c *echo.Context) error {
	return c.JSON(http.StatusCreated, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess, Code: http.StatusCreated})
}

type errString string

func (e errString) Error() string { return string(e) }
