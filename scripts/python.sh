#!/usr/bin/env bash
# Prints the Python interpreter dash's Python package is built for and tested with:
# $DASH_PYTHON if set, else the first of `python3` and /usr/bin/python3 that imports
# torch (on machines where `python3` is a separate pyenv, Debian's interpreter).
set -euo pipefail
if [ -n "${DASH_PYTHON:-}" ]; then
  "$DASH_PYTHON" -c "import torch" || { echo "python.sh: DASH_PYTHON=$DASH_PYTHON cannot import torch" >&2; exit 1; }
  echo "$DASH_PYTHON"
  exit 0
fi
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c "import torch" 2>/dev/null; then
    command -v "$candidate"
    exit 0
  fi
done
echo "python.sh: no python3 that imports torch (scripts/setup.sh installs Debian's python3-torch)" >&2
exit 1
