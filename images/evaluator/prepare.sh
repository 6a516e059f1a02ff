#!/usr/bin/env bash
# Stage judge/yesno.py (the judge's prompt layouts and answer rules, one home) into the
# build context as thinkingbox/common/_yesno.py. Run by sandbox/images.py.
set -euo pipefail
CTX="$1"
PACKAGES="${TBX_PACKAGES:?TBX_PACKAGES must hold the judge package}"
cp "$PACKAGES/judge/yesno.py" "$CTX/thinkingbox/common/_yesno.py"
