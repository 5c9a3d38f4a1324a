package kubetest

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ScaleNamespaces is how many namespaces CreateScale spreads services
// over: svc-N lives in ns-(N mod ScaleNamespaces).
const ScaleNamespaces = 100

// CreateScale fills a cluster for scale tests and benchmarks: the
// namespaces, then services svc-0 … with one port "http" 80/TCP, 16 at a
// time (Each). With perService > 0 every odd service is headless and
// every service has one EndpointSlice of perService ready endpoints with
// pod references, as the endpoint slice controller writes them; with 0,
// ClusterIP services only.
func CreateScale(ctx context.Context, k kubernetes.Interface, services, perService int) error {
	for n := range ScaleNamespaces {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-" + strconv.Itoa(n)}}
		if _, err := k.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	return Each(services, func(i int) error {
		ns, name := "ns-"+strconv.Itoa(i%ScaleNamespaces), "svc-"+strconv.Itoa(i)
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		}
		if perService > 0 && i%2 == 1 {
			svc.Spec.ClusterIP = corev1.ClusterIPNone
		}
		if _, err := k.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
			return err
		}
		if perService == 0 {
			return nil
		}
		http, tcp, p := "http", corev1.ProtocolTCP, int32(8080)
		yes := true
		sl := &discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &http, Protocol: &tcp, Port: &p}},
		}
		for j := range perService {
			n := i*perService + j
			sl.Endpoints = append(sl.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{fmt.Sprintf("10.%d.%d.%d", 100+n>>16, n>>8&0xff, n&0xff)},
				Conditions: discoveryv1.EndpointConditions{Ready: &yes},
				TargetRef:  &corev1.ObjectReference{Kind: "Pod", Namespace: ns, Name: name + "-" + strconv.Itoa(j)},
			})
		}
		_, err := k.DiscoveryV1().EndpointSlices(ns).Create(ctx, sl, metav1.CreateOptions{})
		return err
	})
}
