# Sourced by the bench scripts. build_release OUT PKG builds PKG to OUT as
# releases are built (static, stripped; scripts/release.sh adds version
# stamps), as CoreDNS is (scripts/bench-deps.sh): what an operator runs, and
# a dynamically linked binary takes longer to start.
. scripts/release-flags.sh
build_release() { CGO_ENABLED=0 go build -tags "$release_tags" -trimpath -ldflags='-s -w' -o "$1" "$2"; }
