#!/usr/bin/env bash
# Installs the Debian packages Weft needs when they are missing (root only;
# otherwise it says what is missing and carries on).
set -euo pipefail
# python3-*: the Python package's tests (python/), PyTorch for its torch.distributed backend.
packages=(cmake g++ make libgtest-dev libhwloc-dev libibverbs-dev iproute2 pkg-config python3-pytest python3-numpy
  python3-torch)
missing=()
for p in "${packages[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" = 0 ]; then
  echo "deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q "${missing[@]}" >/dev/null 2>&1 || { apt-get update -q >/dev/null && apt-get install -y -q "${missing[@]}" >/dev/null; }
else
  echo "deps: missing ${missing[*]} (run as root to install them)" >&2
fi
