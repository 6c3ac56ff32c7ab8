#!/usr/bin/env bash
# The main job: installs what is missing, builds, and trains the default
# model (CNN on Fashion-MNIST, 4 learners, AdaComp, one epoch).
# Extra arguments go to `adacomp train`.
# Usage: bash scripts/run.sh [adacomp train options]
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
BUILD_DIR="${BUILD_DIR:-build}"
exec "$BUILD_DIR/tools/adacomp/adacomp" train "$@"
