#!/usr/bin/env bash
# Installs moto's server (pinned) into a virtualenv cached outside the clone and prints the
# virtualenv's python. Idempotent: a cached virtualenv with the right version is reused.
#
#   MOTO_VENV   where the virtualenv lives (default: ~/.cache/karpenter-rs/moto)
#
# The AWS provider's integration tests (karpenter-aws, feature `sdk`) run against this server on
# loopback with fake credentials; nothing talks to AWS.
set -euo pipefail
MOTO_VERSION=5.2.5
VENV="${MOTO_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/karpenter-rs/moto}"
PY="$VENV/bin/python"
if [ -x "$PY" ] && [ "$("$PY" -c 'import moto; print(moto.__version__)' 2>/dev/null)" = "$MOTO_VERSION" ]; then
  echo "$PY"
  exit 0
fi
python=$(command -v python3 || true)
[ -n "$python" ] || { echo "error: python3 is not installed" >&2; exit 1; }
rm -rf "$VENV"
mkdir -p "$(dirname "$VENV")"
"$python" -m venv "$VENV" >&2
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "moto[server]==$MOTO_VERSION" >&2
"$PY" -c 'import moto.server' >&2
echo "$PY"
