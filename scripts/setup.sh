#!/usr/bin/env bash
# Installs every Debian package dash needs. Idempotent: installs only what is
# missing, and runs apt-get update only when something is. Run as root (or with
# sudo available).
set -euo pipefail

packages=(
  cmake g++ make             # build
  libtorch-dev               # LibTorch (CPU) headers and libraries
  libgloo-dev                # Gloo headers, needed by LibTorch's c10d ProcessGroupGloo
  libopenblas0-pthread       # fast BLAS/LAPACK for LibTorch's CPU matmuls and eigh
  libgtest-dev libgmock-dev  # tests
  nlohmann-json3-dev         # JSON reports and dash-train configs
  python3.11-doc             # dash-train's default corpus: the Python manual's .rst sources
  gnuplot-nox                # dash-train compare's validation-loss plot
  # the Python package (scripts/install-python.sh) and its tests
  python3-torch python3-numpy python3-dev pybind11-dev
  python3-pip python3-setuptools python3-wheel python3-pytest
)

missing=()
for package in "${packages[@]}"; do
  if [ "$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null)" != "install ok installed" ]; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
echo "setup: installing ${missing[*]}"
"${sudo_cmd[@]}" apt-get update -q
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
