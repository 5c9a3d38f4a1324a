// Package kubernetes is dnsd's kubernetes source: the Kubernetes DNS-Based
// Service Discovery specification (schema 1.1.0) served from client-go
// informers, for machines inside or outside the cluster
// (docs/sources/kubernetes.md).
//
// A Backend is one connection to a cluster (a clientset and shared
// informers on Services, EndpointSlices, Namespaces and, for pods:
// verified, Pods). A Source is one zone key's view of it: it registers
// handlers on the backend's informers, and a worker goroutine turns each
// changed object into that object's records (a service's records merge
// all its EndpointSlices) in an index readers consult without locks.
// Queries never call the API and never wait for event handling.
package kubernetes
