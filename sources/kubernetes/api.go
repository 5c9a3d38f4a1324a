package kubernetes

import (
	"context"
	"errors"
	"fmt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// The resources a Backend follows, cluster-wide.
const (
	resServices  = "services"
	resSlices    = "endpointslices"
	resNamespace = "namespaces"
	resPods      = "pods"
)

// API lists and watches the resources a Backend follows (services,
// endpointslices, namespaces, pods) in every namespace.
type API interface {
	ListWatch(resource string) cache.ListerWatcher
}

// restAPI is the API over REST: one client for the core group, one for
// discovery.k8s.io, both with a scheme of only the kinds dnsd reads.
// client-go's generated clientset would do the same work but links every
// API group of Kubernetes into the binary and registers them all at
// start-up: with it, every start of dnsd (kubernetes source or not) took
// ~15 ms longer, the binary was 64 MB instead of 28 and an idle process
// held 41 MiB instead of 28.
type restAPI struct {
	core, discovery *rest.RESTClient
}

// NewAPI returns the API of the cluster rc reaches. It does not contact
// the API server.
func NewAPI(rc *rest.Config) (API, error) {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := discoveryv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(scheme).WithoutConversion()
	client := func(path string, gv schema.GroupVersion) (*rest.RESTClient, error) {
		c := rest.CopyConfig(rc)
		c.APIPath = path
		c.GroupVersion = &gv
		c.NegotiatedSerializer = codecs
		if c.UserAgent == "" {
			c.UserAgent = rest.DefaultKubernetesUserAgent()
		}
		cl, err := rest.RESTClientFor(c)
		if err != nil {
			return nil, fmt.Errorf("client %s: %w", gv, err)
		}
		return cl, nil
	}
	core, err := client("/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	disc, err := client("/apis", discoveryv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return restAPI{core: core, discovery: disc}, nil
}

// Ready reports whether the API server answers: nil once its /readyz
// says ok, or it refuses dnsd that path (401, 403, 404: it answers, and
// a list will say what it thinks); an error while it cannot be reached or
// is not ready yet (a restarting server takes connections before it can
// serve lists).
func (a restAPI) Ready(ctx context.Context) error {
	err := a.core.Get().AbsPath("/readyz").Do(ctx).Error()
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		switch status.Status().Code {
		case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound:
			return nil
		}
	}
	return err
}

func (a restAPI) ListWatch(resource string) cache.ListerWatcher {
	c := a.core
	if resource == resSlices {
		c = a.discovery
	}
	return cache.NewListWatchFromClient(c, resource, metav1.NamespaceAll, fields.Everything())
}

// objectOf is the empty object of a resource, the type its informer
// stores.
func objectOf(resource string) runtime.Object {
	switch resource {
	case resServices:
		return &corev1.Service{}
	case resSlices:
		return &discoveryv1.EndpointSlice{}
	case resNamespace:
		return &corev1.Namespace{}
	case resPods:
		return &corev1.Pod{}
	}
	panic("kubernetes: no object for resource " + resource)
}
