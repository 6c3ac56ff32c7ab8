#!/usr/bin/env bash
# Installs the Debian packages adacomp needs, only those that are missing.
# Usage: bash scripts/deps.sh
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config git
  libgtest-dev libgmock-dev libbenchmark-dev
  libcli11-dev nlohmann-json3-dev zlib1g-dev
  libtorch-dev libopenblas0-openmp
  libopenmpi-dev openmpi-bin
  python3-torch python3-torchvision pybind11-dev python3-dev libgloo-dev
  python3-venv python3-pip python3-setuptools python3-wheel python3-matplotlib
  clang-14 libclang-rt-14-dev clang-format-14
  dataset-fashion-mnist fortunes
  iproute2 nftables
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PACKAGES[@]} Debian packages present"
  exit 0
fi

echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
