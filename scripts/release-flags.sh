# Sourced by scripts/release.sh and bench/build.sh: the build tags of a
# release. grpcnotrace leaves out gRPC's request tracing
# (golang.org/x/net/trace), which dnsd never turns on and which links
# html/template; a program that links text/template keeps every exported
# method of every type (templates call methods by name). Without it the
# binary is 4.5 MB smaller (28.0 -> 23.5 MB) and starts ~2 ms sooner.
# TestReleaseTags (e2e/release_test.go) checks what the tags leave out.
release_tags=grpcnotrace
