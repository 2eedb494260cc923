#!/usr/bin/env bash
# Builds and installs the Python package `dash` for the interpreter scripts/python.sh
# picks, offline: the build uses the installed torch, setuptools and pybind11
# (--no-build-isolation), and every dependency is a Debian package (--no-deps).
# As root it goes to /usr/local (Debian's place for locally installed packages;
# PIP_BREAK_SYSTEM_PACKAGES lets pip write there beside Debian's own), else to ~/.local.
# DASH_CMAKE_BUILD_DIR: an existing CMake build folder to reuse (see setup.py).
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
python=$(bash "$root/scripts/python.sh")
args=(--no-build-isolation --no-deps --no-index --quiet)
if [ "$(id -u)" -eq 0 ]; then args+=(--root-user-action=ignore); else args+=(--user); fi
PIP_BREAK_SYSTEM_PACKAGES=1 "$python" -m pip install "${args[@]}" "$root"
echo "install-python: dash installed for $python ($(cd / && "$python" -c 'import dash; print(dash.__file__)'))"
