// Package health keeps the current problem of a backend that connects to a
// server (etcd, the Kubernetes API server): a short cause an operator can act
// on ("connection refused", "x509: certificate signed by unknown authority",
// "401 Unauthorized", "authentication failed"), shown by /ready and logged
// once per change of state, never once per retry.
package health
