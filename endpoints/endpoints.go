package endpoints

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/opemu/opemu/cache"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/endpointslice"
	endpointsliceutil "k8s.io/endpointslice/util"
)

// The Endpoints' labels and annotation, as kube's endpoint controller writes them.
const (
	labelManagedBy    = "endpoints.kubernetes.io/managed-by"
	triggerAnnotation = corev1.EndpointsLastChangeTriggerTime
)

func endpointsKey(ns, name string) cache.Key {
	return cache.Key{Resource: "endpoints", Namespace: ns, Name: name}
}

// syncEndpoints writes svc's Endpoints from pods as kube's endpoint controller does: each Pod
// that should be in endpoints (not terminal, with an IP; not terminating unless the Service
// publishes not-ready addresses) is an address, ready or not ready, with every Service port
// its targetPort resolves to on that Pod; addresses with the same ports share a subset.
func (c *Controller) syncEndpoints(ctx context.Context, svc *corev1.Service, pods []*corev1.Pod, trigger time.Time) error {
	type entry struct {
		addr  corev1.EndpointAddress
		ready bool
		ports []corev1.EndpointPort
	}
	var entries []entry
	for _, pod := range pods {
		if !endpointsliceutil.ShouldPodBeInEndpoints(pod, svc.Spec.PublishNotReadyAddresses) {
			continue
		}
		ip := podIP(pod, svc)
		if ip == "" {
			continue
		}
		e := entry{
			addr:  corev1.EndpointAddress{IP: ip, TargetRef: &corev1.ObjectReference{Kind: "Pod", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}},
			ready: svc.Spec.PublishNotReadyAddresses || endpointsliceutil.IsPodReady(pod),
		}
		if pod.Spec.NodeName != "" {
			e.addr.NodeName = &pod.Spec.NodeName
		}
		if endpointsliceutil.ShouldSetHostname(pod, svc) {
			e.addr.Hostname = pod.Spec.Hostname
		}
		headless := len(svc.Spec.Ports) == 0 && svc.Spec.ClusterIP == corev1.ClusterIPNone
		for i := range svc.Spec.Ports {
			sp := &svc.Spec.Ports[i]
			n, err := endpointslice.FindPort(pod, sp)
			if err != nil {
				continue // this port is not on this Pod
			}
			e.ports = append(e.ports, corev1.EndpointPort{Name: sp.Name, Port: int32(n), Protocol: sp.Protocol, AppProtocol: sp.AppProtocol})
		}
		if len(e.ports) == 0 && !headless {
			continue
		}
		entries = append(entries, e)
	}
	// Repack: one subset per set of ports, addresses sorted by IP (kube's RepackSubsets).
	var subsets []corev1.EndpointSubset
	index := map[string]int{}
	for _, e := range entries {
		slices.SortFunc(e.ports, func(a, b corev1.EndpointPort) int { return strings.Compare(a.Name, b.Name) })
		raw, _ := json.Marshal(e.ports)
		i, ok := index[string(raw)]
		if !ok {
			i = len(subsets)
			index[string(raw)] = i
			subsets = append(subsets, corev1.EndpointSubset{Ports: e.ports})
		}
		if e.ready {
			subsets[i].Addresses = append(subsets[i].Addresses, e.addr)
		} else {
			subsets[i].NotReadyAddresses = append(subsets[i].NotReadyAddresses, e.addr)
		}
	}
	byIP := func(a, b corev1.EndpointAddress) int { return strings.Compare(a.IP, b.IP) }
	for i := range subsets {
		slices.SortFunc(subsets[i].Addresses, byIP)
		slices.SortFunc(subsets[i].NotReadyAddresses, byIP)
	}

	want := corev1.Endpoints{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Endpoints"},
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace, Labels: maps.Clone(svc.Labels)},
		Subsets:    subsets,
	}
	if want.Labels == nil {
		want.Labels = map[string]string{}
	}
	want.Labels[labelManagedBy] = EndpointsController
	if svc.Spec.ClusterIP == corev1.ClusterIPNone {
		want.Labels[corev1.IsHeadlessService] = ""
	} else {
		delete(want.Labels, corev1.IsHeadlessService)
	}
	key := endpointsKey(svc.Namespace, svc.Name)
	obj, err := c.cfg.Endpoints.Get(ctx, key)
	switch {
	case errors.Is(err, cache.ErrNotFound):
		if !trigger.IsZero() {
			want.Annotations = map[string]string{triggerAnnotation: formatTrigger(trigger)}
		}
		body, err := toMap(&want)
		if err != nil {
			return err
		}
		_, err = c.cfg.Endpoints.Create(ctx, key, body)
		if errors.Is(err, cache.ErrAlreadyExists) {
			return err // made meanwhile: the retry updates it
		}
		return err
	case err != nil:
		return err
	}
	var cur corev1.Endpoints
	if err := json.Unmarshal(obj.Raw(), &cur); err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(cur.Subsets, want.Subsets) && maps.Equal(cur.Labels, want.Labels) {
		return nil
	}
	cur.Subsets, cur.Labels = want.Subsets, want.Labels
	if !trigger.IsZero() {
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[triggerAnnotation] = formatTrigger(trigger)
	}
	body, err := toMap(&cur)
	if err != nil {
		return err
	}
	_, err = c.cfg.Endpoints.Update(ctx, key, body)
	return err
}

// deleteEndpoints deletes the Endpoints of a Service that is gone, when this controller
// manages them.
func (c *Controller) deleteEndpoints(ctx context.Context, key cache.Key) error {
	ek := endpointsKey(key.Namespace, key.Name)
	obj, err := c.cfg.Endpoints.Get(ctx, ek)
	if errors.Is(err, cache.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	var cur corev1.Endpoints
	if err := json.Unmarshal(obj.Raw(), &cur); err != nil || cur.Labels[labelManagedBy] != EndpointsController {
		return nil
	}
	_, _, err = c.cfg.Endpoints.Delete(ctx, ek, cache.Preconditions{UID: obj.UID()})
	if errors.Is(err, cache.ErrNotFound) {
		return nil
	}
	return err
}

// podIP is pod's IP of the Service's family (its first IP family; the Pod's first IP when it
// has none of it).
func podIP(pod *corev1.Pod, svc *corev1.Service) string {
	v6 := len(svc.Spec.IPFamilies) > 0 && svc.Spec.IPFamilies[0] == corev1.IPv6Protocol
	for _, ip := range pod.Status.PodIPs {
		if strings.Contains(ip.IP, ":") == v6 {
			return ip.IP
		}
	}
	if len(pod.Status.PodIPs) == 0 {
		return pod.Status.PodIP
	}
	return ""
}
