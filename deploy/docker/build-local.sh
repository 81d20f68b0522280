#!/usr/bin/env bash
# Builds deploy/docker/Dockerfile with podman on a machine that can pull from no
# container registry: the Debian 12 base image is made with debootstrap (from Debian's
# package archive) and imported with `podman import`, then used for both stages.
#   deploy/docker/build-local.sh [TAG] [extra podman build args...]
# PODMAN_FLAGS: global podman flags. The default (runc, cgroupfs, explicit ulimits) is
# what works inside a VM whose cgroups are v1/hybrid and where the container init may
# not raise rlimits; on an ordinary host `PODMAN_FLAGS= ` works too.
set -euo pipefail
cd "$(dirname "$0")/../.."
TAG=${1:-localhost/ember:dev}
shift || true
BASE=${EMBER_BASE_IMAGE:-localhost/ember-debian-base:12}
read -r -a FLAGS <<< "${PODMAN_FLAGS---runtime runc --cgroup-manager cgroupfs}"
ULIMITS=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)

if ! podman "${FLAGS[@]}" image exists "$BASE"; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  debootstrap --variant=minbase bookworm "$tmp/rootfs" >/dev/null
  rm -rf "$tmp"/rootfs/var/cache/apt/archives/*.deb "$tmp"/rootfs/var/lib/apt/lists/*
  tar -C "$tmp/rootfs" -c . | podman "${FLAGS[@]}" import - "$BASE" >/dev/null
fi

podman "${FLAGS[@]}" build --network host "${ULIMITS[@]}" \
  --build-arg DEBIAN_IMAGE="$BASE" --build-arg DEBIAN_SLIM_IMAGE="$BASE" \
  -f deploy/docker/Dockerfile -t "$TAG" "$@" .
