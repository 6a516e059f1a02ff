#!/usr/bin/env bash
# Make debian:bookworm-slim available on machines that cannot pull it:
# debootstrap a minbase bookworm and `docker import` it under that tag, so
# every Dockerfile can stay a standard `FROM debian:bookworm-slim`.
set -euo pipefail
TAG="${TBX_BASE_TAG:-debian:bookworm-slim}"
MIRROR="${TBX_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if docker image inspect "$TAG" >/dev/null 2>&1; then
  echo "base: $TAG present"; exit 0
fi
if [ "${TBX_TRY_PULL:-1}" = 1 ] && timeout 20 docker pull "$TAG" >/dev/null 2>&1; then
  echo "base: $TAG pulled"; exit 0
fi
command -v debootstrap >/dev/null || { apt-get update -qq && apt-get install -y -qq debootstrap >/dev/null; }
root=$(mktemp -d /tmp/tbx-base.XXXXXX)
trap 'rm -rf "$root"' EXIT
echo "base: debootstrap bookworm (minbase) into $root"
debootstrap --variant=minbase --include=ca-certificates bookworm "$root" "$MIRROR" >/dev/null
# Slim it the way the official -slim image is slimmed: no apt lists, docs or man pages.
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* \
       "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/var/log/*.log
tar -C "$root" -c . | docker import \
  -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'CMD ["bash"]' - "$TAG" >/dev/null
echo "base: $TAG imported ($(docker image inspect -f '{{.Id}}' "$TAG"))"
