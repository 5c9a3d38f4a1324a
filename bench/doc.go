// Package bench holds dnsd's cross-package benchmarks: the hot path from
// a parsed query through zone match and a real source to a response, as
// `go test -bench . ./bench` measures it. Figures go to docs/performance.md.
package bench
