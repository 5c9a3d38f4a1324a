package kubernetes

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

// The informers' stores keep services and endpoint slices in the compact
// forms below, converted from the API's objects as they arrive (strip):
// only what the records are built from. A corev1.Service is over 600
// bytes before its strings, an EndpointSlice over 350 with two maps (its
// service label, its trigger-time annotation) of about 300 bytes each,
// and each of its endpoints 96; TestMemoryReal measures the difference.

// objMeta is what dnsd keeps of an object's metadata: its name,
// namespace, UID and resource version. It implements metav1.Object for
// the informers (store keys, resync detection); the other fields read as
// empty and ignore writes.
type objMeta struct {
	name, namespace, resourceVersion string
	uid                              types.UID
}

func newObjMeta(m *metav1.ObjectMeta) objMeta {
	return objMeta{name: m.Name, namespace: m.Namespace, resourceVersion: m.ResourceVersion, uid: m.UID}
}

var _ metav1.Object = (*objMeta)(nil)

func (m *objMeta) GetNamespace() string                          { return m.namespace }
func (m *objMeta) SetNamespace(v string)                         { m.namespace = v }
func (m *objMeta) GetName() string                               { return m.name }
func (m *objMeta) SetName(v string)                              { m.name = v }
func (m *objMeta) GetGenerateName() string                       { return "" }
func (m *objMeta) SetGenerateName(string)                        {}
func (m *objMeta) GetUID() types.UID                             { return m.uid }
func (m *objMeta) SetUID(v types.UID)                            { m.uid = v }
func (m *objMeta) GetResourceVersion() string                    { return m.resourceVersion }
func (m *objMeta) SetResourceVersion(v string)                   { m.resourceVersion = v }
func (m *objMeta) GetGeneration() int64                          { return 0 }
func (m *objMeta) SetGeneration(int64)                           {}
func (m *objMeta) GetSelfLink() string                           { return "" }
func (m *objMeta) SetSelfLink(string)                            {}
func (m *objMeta) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (m *objMeta) SetCreationTimestamp(metav1.Time)              {}
func (m *objMeta) GetDeletionTimestamp() *metav1.Time            { return nil }
func (m *objMeta) SetDeletionTimestamp(*metav1.Time)             {}
func (m *objMeta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (m *objMeta) SetDeletionGracePeriodSeconds(*int64)          {}
func (m *objMeta) GetLabels() map[string]string                  { return nil }
func (m *objMeta) SetLabels(map[string]string)                   {}
func (m *objMeta) GetAnnotations() map[string]string             { return nil }
func (m *objMeta) SetAnnotations(map[string]string)              {}
func (m *objMeta) GetFinalizers() []string                       { return nil }
func (m *objMeta) SetFinalizers([]string)                        {}
func (m *objMeta) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (m *objMeta) SetOwnerReferences([]metav1.OwnerReference)    {}
func (m *objMeta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (m *objMeta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}
func (m *objMeta) GetObjectKind() schema.ObjectKind              { return schema.EmptyObjectKind }

// serviceObj is what dnsd keeps of a Service.
type serviceObj struct {
	objMeta
	typ          corev1.ServiceType
	headless     bool     // spec.clusterIP is None or empty
	clusterIPs   []string // spec.clusterIPs, else spec.clusterIP (not kept when headless)
	externalName string
	externalIPs  []string
	ports        []servicePort
	ingress      []corev1.LoadBalancerIngress // IP and Hostname only
	// publishNotReady: spec.publishNotReadyAddresses, or the older
	// tolerate-unready-endpoints annotation set to "true".
	publishNotReady bool
}

type servicePort struct {
	name  string
	proto corev1.Protocol
	port  int32
}

var _ runtime.Object = (*serviceObj)(nil)

func (s *serviceObj) DeepCopyObject() runtime.Object {
	c := *s
	return &c // the slices are never modified once converted
}

func newServiceObj(o *corev1.Service) *serviceObj {
	s := &serviceObj{
		objMeta:         newObjMeta(&o.ObjectMeta),
		typ:             o.Spec.Type,
		headless:        o.Spec.ClusterIP == corev1.ClusterIPNone || o.Spec.ClusterIP == "",
		externalName:    o.Spec.ExternalName,
		externalIPs:     o.Spec.ExternalIPs,
		publishNotReady: o.Spec.PublishNotReadyAddresses || o.Annotations[tolerateUnreadyAnnotation] == "true",
	}
	if !s.headless {
		s.clusterIPs = o.Spec.ClusterIPs
		if len(s.clusterIPs) == 0 {
			s.clusterIPs = []string{o.Spec.ClusterIP}
		}
	}
	if len(o.Spec.Ports) > 0 {
		s.ports = make([]servicePort, len(o.Spec.Ports))
		for i, p := range o.Spec.Ports {
			s.ports[i] = servicePort{name: p.Name, proto: p.Protocol, port: p.Port}
		}
	}
	if len(o.Status.LoadBalancer.Ingress) > 0 {
		s.ingress = make([]corev1.LoadBalancerIngress, len(o.Status.LoadBalancer.Ingress))
		for i, in := range o.Status.LoadBalancer.Ingress {
			s.ingress[i] = corev1.LoadBalancerIngress{IP: in.IP, Hostname: in.Hostname}
		}
	}
	return s
}

// sliceObj is what dnsd keeps of an EndpointSlice.
type sliceObj struct {
	objMeta
	service string // the kubernetes.io/service-name label
	family  discoveryv1.AddressType
	// changed is the endpoints.kubernetes.io/last-change-trigger-time
	// annotation: when the change behind this version happened, the start
	// of the DNS programming latency (zero: none, or not a time).
	changed   time.Time
	ports     []discoveryv1.EndpointPort
	endpoints []sliceEndpoint
}

type sliceEndpoint struct {
	addresses []string
	hostname  string // "": none
	pod       string // the target pod's name when it has no hostname (endpoint_pod_names)
	notReady  bool   // conditions.ready is false (unset counts as ready)
}

var _ runtime.Object = (*sliceObj)(nil)

func (s *sliceObj) DeepCopyObject() runtime.Object {
	c := *s
	return &c // the slices are never modified once converted
}

// newSliceObj converts o. The target pod's name of an endpoint without a
// hostname is always kept, so that every source on a connection can name
// endpoints by it (endpoint_pod_names) without a connection of its own.
func newSliceObj(o *discoveryv1.EndpointSlice) *sliceObj {
	s := &sliceObj{
		objMeta: newObjMeta(&o.ObjectMeta),
		service: o.Labels[discoveryv1.LabelServiceName],
		family:  o.AddressType,
		ports:   o.Ports,
	}
	if v, ok := o.Annotations[corev1.EndpointsLastChangeTriggerTime]; ok {
		if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
			s.changed = t
		}
	}
	if len(o.Endpoints) > 0 {
		s.endpoints = make([]sliceEndpoint, len(o.Endpoints))
		for i := range o.Endpoints {
			e := &o.Endpoints[i]
			n := sliceEndpoint{addresses: e.Addresses, notReady: e.Conditions.Ready != nil && !*e.Conditions.Ready}
			if e.Hostname != nil {
				n.hostname = *e.Hostname
			}
			if e.Hostname == nil && e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
				n.pod = e.TargetRef.Name
			}
			s.endpoints[i] = n
		}
	}
	return s
}
