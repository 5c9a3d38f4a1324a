// Package e2e holds the end-to-end tests of what dnsd ships: the built
// binary, driven as an operator would (a dnsd.yaml, real sockets, files
// and signals), its release packages and the files in contrib/. Only this
// package builds the binary (its TestMain, once, with -race); the tests of
// every other package never do.
//
// The fixture (fixture_test.go): config builds a dnsd.yaml from the
// common parts with the zones as YAML text, start and startYAML run the
// binary on free ports, and the dnsd they return asks, reloads, reads the
// log and scrapes /metrics. internal/dnstest is the vocabulary under it.
package e2e
