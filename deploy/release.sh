#!/usr/bin/env bash
# Builds the release binaries of auditchain, stamped with their version and
# commit, and writes SHA256SUMS beside them (docs/operations.md "Releases").
#
#   deploy/release.sh VERSION [OUTDIR]     e.g. deploy/release.sh v0.1.0 dist
#
# For each platform of AUDITCHAIN_RELEASE_PLATFORMS (default: linux/amd64
# linux/arm64 darwin/arm64) it writes OUTDIR/auditchain_VERSION_OS_ARCH.tar.gz
# holding the static binary (CGO_ENABLED=0: the SQLite driver is pure Go),
# LICENSE, README.md and CHANGELOG.md. The build is reproducible: -trimpath,
# no VCS stamp but the one given by -ldflags, and archive times and owners taken
# from the commit, so the same commit and Go version give the same SHA256SUMS.
# It refuses a work tree with uncommitted changes to tracked files unless
# AUDITCHAIN_RELEASE_ALLOW_DIRTY=1 (the commit then is marked "-dirty").
set -euo pipefail

version=${1:?usage: deploy/release.sh VERSION [OUTDIR]}
out=${2:-dist}
cd "$(dirname "$0")/.."
case "$version" in
  v[0-9]*) ;;
  *) echo "release: VERSION must look like v1.2.3, got $version" >&2; exit 2 ;;
esac

commit=$(git rev-parse HEAD)
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  if [ "${AUDITCHAIN_RELEASE_ALLOW_DIRTY:-}" != 1 ]; then
    echo "release: the work tree has uncommitted changes; commit them (or set AUDITCHAIN_RELEASE_ALLOW_DIRTY=1)" >&2
    exit 1
  fi
  commit="$commit-dirty"
fi
commit_time=$(git log -1 --format=%cI HEAD)
epoch=$(git log -1 --format=%ct HEAD)
pkg=github.com/auditchain/auditchain/internal/buildinfo
ldflags="-s -w -X $pkg.version=$version -X $pkg.commit=$commit -X $pkg.commitTime=$commit_time"

mkdir -p "$out"
archives=()
for platform in ${AUDITCHAIN_RELEASE_PLATFORMS:-linux/amd64 linux/arm64 darwin/arm64}; do
  goos=${platform%/*} goarch=${platform#*/}
  name="auditchain_${version}_${goos}_${goarch}"
  stage="$out/$name"
  rm -rf "$stage" && mkdir -p "$stage"
  CGO_ENABLED=0 GOOS=$goos GOARCH=$goarch go build -trimpath -buildvcs=false \
    -ldflags "$ldflags" -o "$stage/auditchain" ./cmd/auditchain
  cp LICENSE README.md CHANGELOG.md "$stage/"
  tar --sort=name --mtime="@$epoch" --owner=0 --group=0 --numeric-owner \
    -C "$out" -cf - "$name" | gzip -n > "$out/$name.tar.gz"
  rm -rf "$stage"
  archives+=("$name.tar.gz")
  echo "release: $out/$name.tar.gz" >&2
done
(cd "$out" && sha256sum "${archives[@]}" > SHA256SUMS)
echo "release: $out/SHA256SUMS" >&2
