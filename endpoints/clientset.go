package endpoints

import (
	"context"
	"encoding/json"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/events"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	discoveryclient "k8s.io/client-go/kubernetes/typed/discovery/v1"
)

// clientset is the part of client-go's clientset the EndpointSlice reconciler writes through
// (DiscoveryV1().EndpointSlices(ns): Create, Update, Delete), over the in-process client. Its
// other methods are nil: the reconciler (k8s.io/endpointslice v0.37) calls none of them.
type clientset struct {
	kubernetes.Interface
	c Client
}

func (s clientset) DiscoveryV1() discoveryclient.DiscoveryV1Interface { return discovery{c: s.c} }

type discovery struct {
	discoveryclient.DiscoveryV1Interface
	c Client
}

func (d discovery) EndpointSlices(ns string) discoveryclient.EndpointSliceInterface {
	return sliceClient{c: d.c, ns: ns}
}

type sliceClient struct {
	discoveryclient.EndpointSliceInterface
	c  Client
	ns string
}

func sliceKey(ns, name string) cache.Key {
	return cache.Key{Group: "discovery.k8s.io", Resource: "endpointslices", Namespace: ns, Name: name}
}

func (s sliceClient) Create(ctx context.Context, es *discoveryv1.EndpointSlice, _ metav1.CreateOptions) (*discoveryv1.EndpointSlice, error) {
	return s.write(ctx, es, s.c.Create)
}

func (s sliceClient) Update(ctx context.Context, es *discoveryv1.EndpointSlice, _ metav1.UpdateOptions) (*discoveryv1.EndpointSlice, error) {
	return s.write(ctx, es, s.c.Update)
}

func (s sliceClient) write(ctx context.Context, es *discoveryv1.EndpointSlice, w func(context.Context, cache.Key, map[string]any) (*cache.Object, error)) (*discoveryv1.EndpointSlice, error) {
	es = es.DeepCopy()
	es.APIVersion, es.Kind = "discovery.k8s.io/v1", "EndpointSlice"
	body, err := toMap(es)
	if err != nil {
		return nil, err
	}
	obj, err := w(ctx, sliceKey(s.ns, es.Name), body)
	if err != nil {
		return nil, err
	}
	var out discoveryv1.EndpointSlice
	return &out, json.Unmarshal(obj.Raw(), &out)
}

func (s sliceClient) Delete(ctx context.Context, name string, _ metav1.DeleteOptions) error {
	_, _, err := s.c.Delete(ctx, sliceKey(s.ns, name), cache.Preconditions{})
	return err
}

// eventRecorder is client-go's record.EventRecorder over opemu's recorder, for the
// reconciler's Events (about topology hints).
type eventRecorder struct{ r Recorder }

func (e eventRecorder) Event(obj runtime.Object, eventtype, reason, message string) {
	if e.r == nil {
		return
	}
	svc, ok := obj.(*corev1.Service)
	if !ok {
		return
	}
	e.r.Record(context.Background(), events.Event{
		Object: events.Ref{APIVersion: "v1", Kind: "Service", Namespace: svc.Namespace, Name: svc.Name, UID: string(svc.UID)},
		Type:   eventtype, Reason: reason, Message: message, Source: SliceController,
	})
}

func (e eventRecorder) Eventf(obj runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	e.Event(obj, eventtype, reason, sprintf(messageFmt, args...))
}

func (e eventRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, messageFmt string, args ...any) {
	e.Event(obj, eventtype, reason, sprintf(messageFmt, args...))
}
