#!/usr/bin/env bash
# Builds the opemu container image for linux/amd64 and linux/arm64 from this checkout, with
# podman (or docker buildx with ENGINE=docker), pulling nothing: the static binaries are
# cross-compiled here by Go and copied into an empty (scratch) image by the Containerfile.
#
#   bash deploy/image.sh                                  # opemu:dev, both architectures (a manifest list)
#   IMAGE=ghcr.io/you/opemu:v1 bash deploy/image.sh       # another name (push it: podman manifest push --all IMAGE)
#   PLATFORMS=linux/amd64 bash deploy/image.sh            # this machine's architecture only (a plain image)
#   ENGINE=docker bash deploy/image.sh                    # docker buildx (needs a builder for several platforms)
set -euo pipefail
cd "$(dirname "$0")/.."
image=${IMAGE:-opemu:dev}
platforms=${PLATFORMS:-linux/amd64,linux/arm64}
engine=${ENGINE:-podman}
version=${VERSION:-$(git describe --tags --always --dirty 2>/dev/null || echo dev)}
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)

# The files the Containerfile copies: dist/rootfs (an empty /tmp) and dist/linux-ARCH/opemu.
rm -rf dist
mkdir -p dist/rootfs/tmp
chmod 1777 dist/rootfs/tmp
for platform in ${platforms//,/ }; do
  arch=${platform#linux/}
  echo "== go build for $platform"
  CGO_ENABLED=0 GOOS=linux GOARCH=$arch go build -trimpath -ldflags "-s -w -X main.version=$version" -o "dist/linux-$arch/opemu" .
done

args=(--platform "$platforms" --build-arg "VERSION=$version" --build-arg "REVISION=$revision" -f Containerfile)
echo "== $engine build $image for $platforms"
case $engine in
  podman)
    if [[ $platforms == *,* ]]; then
      # Several platforms: one image each, gathered under $image as a manifest list.
      podman manifest rm "$image" >/dev/null 2>&1 || podman rmi "$image" >/dev/null 2>&1 || true
      podman build "${args[@]}" --manifest "$image" .
    else
      podman build "${args[@]}" -t "$image" .
    fi
    ;;
  docker) docker buildx build "${args[@]}" -t "$image" ${DOCKER_BUILD_FLAGS:-} . ;;
  *) echo "ENGINE must be podman or docker" >&2; exit 2 ;;
esac
echo "== built $image"
