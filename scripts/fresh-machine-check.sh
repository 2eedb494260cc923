#!/usr/bin/env bash
# fresh-machine-check.sh [COMMAND]: clone this repository's HEAD into a brand-new
# Debian 12 (bookworm) chroot, where nothing is installed beyond a minimal base
# system, and run the README command there (default: bash scripts/test.sh).
# Proves that the setup script installs everything the project needs.
# Needs root and debootstrap (installed if missing). Env: FRESH_ROOT (/tmp/dash-fresh-root).
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "must run as root (debootstrap/chroot/mount)" >&2; exit 2; }
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
command=${1:-bash scripts/test.sh}
root=${FRESH_ROOT:-/tmp/dash-fresh-root}

if [ -z "${FRESH_IN_NS:-}" ] && command -v unshare >/dev/null; then
  FRESH_IN_NS=1 exec unshare --mount --propagation private /bin/bash "$(realpath "$0")" "$@"
fi

if [ ! -e "$root/.bootstrapped" ]; then
  command -v debootstrap >/dev/null || apt-get install -y -q debootstrap
  rm -rf --one-file-system "$root"
  debootstrap --variant=minbase --include=git,ca-certificates bookworm "$root" http://deb.debian.org/debian
  touch "$root/.bootstrapped"
fi
mount -t proc proc "$root/proc"
mount --bind /dev "$root/dev"
trap 'umount "$root/dev" "$root/proc" 2>/dev/null || true' EXIT
cp -L /etc/resolv.conf "$root/etc/resolv.conf"

rm -rf "$root/work/dash"
mkdir -p "$root/work"
git clone -q "$repo" "$root/work/dash"
chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
  bash -c "cd /work/dash && $command"
