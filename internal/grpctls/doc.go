// Package grpctls holds gRPC transport credentials that verify a
// server's certificate against a configured name.
package grpctls
