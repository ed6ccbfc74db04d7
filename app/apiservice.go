package app

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"

	"github.com/opemu/opemu/cache"
	"github.com/opemu/opemu/kinds"
	"github.com/opemu/opemu/registry"
)

// The default/kubernetes Service, its Endpoints and its EndpointSlice, which kube-apiserver
// creates and keeps pointing at itself (its controlplane's kubernetesservice controller and
// endpoint reconciler): cluster IP 10.96.0.1, port 443 named https, and the endpoint is this
// server's own listener, the address a client in a test can dial (from the Endpoints, as
// operators that write NetworkPolicies for the API server read it, or as
// KUBERNETES_SERVICE_HOST and _PORT would say in a Pod). A listener on every interface
// advertises the host's default address, as kube-apiserver's --advertise-address does.

// apiServiceInterval is how often the objects are checked and mended (kube-apiserver's
// endpoint reconciler's interval).
const apiServiceInterval = 10 * time.Second

// apiService writes the kubernetes Service and its endpoints for one listener.
type apiService struct {
	client *registry.Client
	ip     net.IP
	port   int
	clock  clock.WithTicker
}

// newAPIService is the apiService of the listener at addr.
func newAPIService(client *registry.Client, addr net.Addr, clk clock.WithTicker) apiService {
	s := apiService{client: client, ip: net.IPv4(127, 0, 0, 1), clock: clk}
	if tcp, ok := addr.(*net.TCPAddr); ok {
		s.port = tcp.Port
		switch {
		case tcp.IP == nil || tcp.IP.IsUnspecified():
			if ip, err := utilnet.ResolveBindAddress(tcp.IP); err == nil {
				s.ip = ip
			}
		default:
			s.ip = tcp.IP
		}
	}
	return s
}

// run mends the objects every apiServiceInterval on the clock until ctx is done.
func (s apiService) run(ctx context.Context) {
	t := s.clock.NewTicker(apiServiceInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		_ = s.ensure(ctx, true)
	}
}

// ensure creates the objects that are missing and, with mend, points those that exist at this
// listener again.
func (s apiService) ensure(ctx context.Context, mend bool) error {
	addressType := discoveryv1.AddressTypeIPv4
	if s.ip.To4() == nil {
		addressType = discoveryv1.AddressTypeIPv6
	}
	port := int32(s.port)
	svc := &corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: registry.DefaultNamespace, Labels: map[string]string{"component": "apiserver", "provider": "kubernetes"}},
		Spec: corev1.ServiceSpec{
			Ports: []corev1.ServicePort{{Name: "https", Protocol: corev1.ProtocolTCP, Port: 443, TargetPort: intstr.FromInt32(port)}},
			// clusterIPs and ipFamilies are allocated from clusterIP, after the field manager,
			// as kube-apiserver's own create of it has them (not owned by kube-apiserver).
			ClusterIP:       kinds.KubernetesServiceIP,
			Type:            corev1.ServiceTypeClusterIP,
			SessionAffinity: corev1.ServiceAffinityNone,
			IPFamilyPolicy:  ptr.To(corev1.IPFamilyPolicySingleStack),
		},
	}
	eps := &corev1.Endpoints{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Endpoints"},
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: registry.DefaultNamespace, Labels: map[string]string{discoveryv1.LabelSkipMirror: "true"}},
		Subsets: []corev1.EndpointSubset{{
			Addresses: []corev1.EndpointAddress{{IP: s.ip.String()}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: port, Protocol: corev1.ProtocolTCP}},
		}},
	}
	slice := &discoveryv1.EndpointSlice{
		TypeMeta:    metav1.TypeMeta{APIVersion: "discovery.k8s.io/v1", Kind: "EndpointSlice"},
		ObjectMeta:  metav1.ObjectMeta{Name: "kubernetes", Namespace: registry.DefaultNamespace, Labels: map[string]string{discoveryv1.LabelServiceName: "kubernetes"}},
		AddressType: addressType,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{s.ip.String()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To(port)}},
	}
	var errs []error
	for _, o := range []struct {
		key  cache.Key
		want any
		// same reports whether the stored object (decoded into a new value of want's type)
		// points here; point makes it.
		same  func(stored any) bool
		point func(stored any)
	}{
		{cache.Key{Resource: "services", Namespace: registry.DefaultNamespace, Name: "kubernetes"}, svc,
			func(v any) bool { return reflect.DeepEqual(v.(*corev1.Service).Spec.Ports, svc.Spec.Ports) },
			func(v any) { v.(*corev1.Service).Spec.Ports = svc.Spec.Ports }},
		{cache.Key{Resource: "endpoints", Namespace: registry.DefaultNamespace, Name: "kubernetes"}, eps,
			func(v any) bool { return reflect.DeepEqual(v.(*corev1.Endpoints).Subsets, eps.Subsets) },
			func(v any) { v.(*corev1.Endpoints).Subsets = eps.Subsets }},
		{cache.Key{Group: "discovery.k8s.io", Resource: "endpointslices", Namespace: registry.DefaultNamespace, Name: "kubernetes"}, slice,
			func(v any) bool {
				es := v.(*discoveryv1.EndpointSlice)
				return es.AddressType == slice.AddressType && reflect.DeepEqual(es.Endpoints, slice.Endpoints) && reflect.DeepEqual(es.Ports, slice.Ports)
			},
			func(v any) {
				es := v.(*discoveryv1.EndpointSlice)
				es.Endpoints, es.Ports = slice.Endpoints, slice.Ports
			}},
	} {
		errs = append(errs, s.write(ctx, o.key, o.want, mend, o.same, o.point))
	}
	return errors.Join(errs...)
}

// write creates want at key when it is missing and, with mend, updates the stored object with
// point when same says it does not point here.
func (s apiService) write(ctx context.Context, key cache.Key, want any, mend bool, same func(any) bool, point func(any)) error {
	stored, err := s.client.Get(ctx, key)
	if errors.Is(err, cache.ErrNotFound) {
		obj, err := toObject(want)
		if err != nil {
			return err
		}
		_, err = s.client.Create(ctx, key, obj)
		if errors.Is(err, cache.ErrAlreadyExists) {
			return nil // another replica made it
		}
		return err
	}
	if err != nil || !mend {
		return err
	}
	have := reflect.New(reflect.TypeOf(want).Elem()).Interface()
	if err := json.Unmarshal(stored.Raw(), have); err != nil {
		return err
	}
	if same(have) {
		return nil
	}
	point(have)
	obj, err := toObject(have)
	if err != nil {
		return err
	}
	_, err = s.client.Update(ctx, key, obj)
	return err
}

// toObject is a typed object as the decoded JSON the client writes.
func toObject(v any) (map[string]any, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return cache.DecodeJSON(raw)
}
