#!/usr/bin/env bash
# Builds the opemu container image for linux/amd64 and linux/arm64 from this checkout, with
# podman (or docker buildx with ENGINE=docker), pulling nothing: the static binaries are
# cross-compiled here by Go and copied into an empty (scratch) image by the Containerfile.
#
#   bash deploy/image.sh                          # localhost/opemu:dev-amd64 and :dev-arm64; :dev is this machine's
#   PLATFORMS=linux/amd64 bash deploy/image.sh    # one architecture only
#   IMAGE=registry.example.com/team/opemu:v1 PUSH=1 bash deploy/image.sh   # and push IMAGE: a manifest list of both
#   ENGINE=docker bash deploy/image.sh            # docker buildx (several platforms need a builder that can push: PUSH=1)
#
# podman keeps one image per architecture (IMAGE-ARCH; no intermediate images: the build is
# two copies) and tags this machine's as IMAGE; the manifest list naming both is made only to
# push it (podman 4.3 cannot list local images while a manifest list is among them).
set -euo pipefail
cd "$(dirname "$0")/.."
image=${IMAGE:-localhost/opemu:dev}
platforms=${PLATFORMS:-linux/amd64,linux/arm64}
engine=${ENGINE:-podman}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
host=linux/$(go env GOARCH)

# The files the Containerfile copies: dist/rootfs (an empty /tmp) and dist/linux-ARCH/opemu.
rm -rf dist
mkdir -p dist/rootfs/tmp
chmod 1777 dist/rootfs/tmp
for platform in ${platforms//,/ }; do
  arch=${platform#linux/}
  echo "== go build for $platform"
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "-s -w -X main.version=$version" -o "dist/linux-$arch/opemu" .
done

args=(--build-arg "VERSION=$version" --build-arg "REVISION=$revision" -f Containerfile)
case $engine in
  podman)
    for platform in ${platforms//,/ }; do
      echo "== podman build $image-${platform#linux/} for $platform"
      podman build --layers=false --platform "$platform" "${args[@]}" -t "$image-${platform#linux/}" .
      if [[ $platform == "$host" ]]; then podman tag "$image-${platform#linux/}" "$image"; fi
    done
    if [[ -n ${PUSH:-} ]]; then
      list="$image-list-$$"
      podman manifest create "$list"
      trap 'podman manifest rm "$list" >/dev/null' EXIT
      for platform in ${platforms//,/ }; do podman manifest add "$list" "containers-storage:$image-${platform#linux/}"; done
      podman manifest push --all "$list" "docker://$image"
    fi
    ;;
  docker)
    docker buildx build --platform "$platforms" "${args[@]}" -t "$image" ${PUSH:+--push} . ;;
  *) echo "ENGINE must be podman or docker" >&2; exit 2 ;;
esac
echo "== built $image"
