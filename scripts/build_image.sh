#!/usr/bin/env bash
# Build the Space's image from this repository's Dockerfile with podman: the real base where a
# registry answers, else a stand-in made from Debian's packages under the same name; this
# machine's CA bundle and wheel folder go in at build time only. Prints the build's wall time
# and the image's size, uncompressed and compressed. Usage: bash scripts/build_image.sh [--tag T]
# [--no-compressed] [--build-arg K=V]. docs/deployment.md, "Building the image".
set -euo pipefail
cd "$(dirname "$0")/.."
exec python3 scripts/image.py build "$@"
