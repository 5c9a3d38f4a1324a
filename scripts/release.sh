#!/usr/bin/env bash
# Builds a release from the checked-out commit into dist/ (or $OUT):
#
#   dnsd_FILEVERSION_linux_ARCH    static, stripped binaries (CGO_ENABLED=0)
#   dnsd_FILEVERSION-1_ARCH.deb    Debian/Ubuntu packages
#   dnsd-FILEVERSION-1.ARCH.rpm    RHEL/Fedora/SUSE packages (ARCH: x86_64, aarch64)
#   SHA256SUMS
#
# VERSION is the version inside the packages and of `dnsd version`; it may
# hold a '~' (a pre-release, sorted before the release by dpkg and rpm:
# 0.0.0~git... < 0.0.0). FILEVERSION, in every file name, is VERSION with
# each '~' made '-' ('~' is awkward in URLs, shells and release hosts).
#
# Reproducible: the same commit gives the same bytes. The binaries are built
# with -trimpath and no build id, and every date (the version stamp, man page
# dates, file times inside the packages) is the commit's time
# (SOURCE_DATE_EPOCH, unless set by the caller).
#
# Environment: OUT (default dist), ARCHES (default "amd64 arm64"),
# VERSION (default: the tag vX.Y.Z on HEAD without its v, else
# 0.0.0~git.YYYYMMDDHHMMSS.COMMIT12).
# The packager (nfpm) is pinned by hack/release-tools/go.mod.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
. scripts/release-flags.sh

out=${OUT:-dist}
mkdir -p "$out"
out=$(cd "$out" && pwd)
arches=${ARCHES:-amd64 arm64}

commit=$(git rev-parse HEAD)
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct HEAD)}
date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
if [ -z "${VERSION:-}" ]; then
	if tag=$(git describe --tags --exact-match --match 'v[0-9]*' HEAD 2>/dev/null); then
		VERSION=${tag#v}
	else
		VERSION=0.0.0~git.$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y%m%d%H%M%S).${commit:0:12}
	fi
fi
# The file name form of the version, for every file (see above).
fileversion=${VERSION//\~/-}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The release tools, built once for this machine. GOFLAGS from the caller
# (e.g. -race) must not leak into these builds.
export GOFLAGS=-mod=readonly
(cd hack/release-tools && CGO_ENABLED=0 go build -trimpath -o "$work/bin/" ./mkman ./mkpkg)

# Man pages, generated from the docs (no second copy of the text): dnsd(8)
# and dnsd.yaml(5), which takes every page of docs/sources.
mkdir -p "$work/man"
"$work/bin/mkman" -root . -out "$work/man" -version "$VERSION"
gzip -9n "$work/man/dnsd.8" "$work/man/dnsd.yaml.5"

files=()
for arch in $arches; do
	bin="$out/dnsd_${fileversion}_linux_${arch}"
	echo "release.sh: dnsd $VERSION linux/$arch" >&2
	CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -tags "$release_tags" -trimpath -buildvcs=false \
		-ldflags "-s -w -buildid= -X main.version=$VERSION -X main.commit=$commit -X main.date=$date" \
		-o "$bin" .
	files+=("$(basename "$bin")")
	for format in deb rpm; do
		pkg=$(DNSD_VERSION=$VERSION DNSD_ARCH=$arch DNSD_BIN=$bin DNSD_MAN=$work/man \
			"$work/bin/mkpkg" -config contrib/packaging/nfpm.yaml -format "$format" -out "$out" -fileversion "$fileversion")
		files+=("$(basename "$pkg")")
	done
done

(cd "$out" && sha256sum "${files[@]}" >SHA256SUMS)
echo "release.sh: wrote ${files[*]} SHA256SUMS to $out" >&2
