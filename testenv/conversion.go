package testenv

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/conversion"
)

// scheme is the Scheme that says which CRDs are converted by the suite's webhook.
func (o Options) scheme() *runtime.Scheme {
	switch {
	case o.CRDInstallOptions.Scheme != nil:
		return o.CRDInstallOptions.Scheme
	case o.Scheme != nil:
		return o.Scheme
	}
	return scheme.Scheme
}

// conversionWebhooks decides the conversion of crds as envtest's CRD installation does: a CRD
// that preserves unknown fields is left alone; one whose kind is convertible in s (a Hub and
// Convertible spokes), or any with ignoreScheme, is returned, to be converted by the local
// webhook server (pointConversions); every other one loses its conversion (strategy None).
// crds are changed in place.
func conversionWebhooks(crds []*apiextensionsv1.CustomResourceDefinition, s *runtime.Scheme, ignoreScheme bool) []*apiextensionsv1.CustomResourceDefinition {
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, c := range crds {
		if c.Spec.PreserveUnknownFields {
			continue
		}
		if !ignoreScheme && !convertible(s, c) {
			c.Spec.Conversion = nil
			continue
		}
		out = append(out, c)
	}
	return out
}

// pointConversions makes crds converted by the local webhook server's /convert, trusting its
// CA, as envtest does (ConversionReview v1 and v1beta1 offered; opemu sends v1).
func (o *WebhookInstallOptions) pointConversions(crds []*apiextensionsv1.CustomResourceDefinition) {
	for _, c := range crds {
		url := "https://" + o.hostPort() + "/convert"
		c.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ConversionReviewVersions: []string{"v1", "v1beta1"},
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: o.LocalServingCAData},
			},
		}
	}
}

// convertible says whether c's kind is convertible in s (only the CRD's own kinds are looked
// at, not the whole Scheme: a start stays cheap).
func convertible(s *runtime.Scheme, c *apiextensionsv1.CustomResourceDefinition) bool {
	for _, v := range c.Spec.Versions {
		gvk := schema.GroupVersionKind{Group: c.Spec.Group, Version: v.Name, Kind: c.Spec.Names.Kind}
		if !s.Recognizes(gvk) {
			continue
		}
		obj, err := s.New(gvk)
		if err != nil {
			return false
		}
		ok, err := conversion.IsConvertible(s, obj)
		return ok && err == nil
	}
	return false
}
