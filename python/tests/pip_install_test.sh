#!/usr/bin/env bash
# `pip install ./python` into a fresh virtual environment (with Debian's torch and
# numpy visible through --system-site-packages), offline (--no-index), then the
# installed package is imported from outside the source tree and used: the
# functional API conserves every element (frame + residue == gradient) and
# compresses, and adacomp.torch imports.
# Usage: pip_install_test.sh PATH/TO/python-dir [PYTHON]
set -euo pipefail
SRC="$(cd "$1" && pwd)"
PY="${2:-/usr/bin/python3}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$PY" -m venv --system-site-packages "$tmp/venv"
if ! ADACOMP_SETUP_BUILD_DIR="$tmp/build" timeout 600 "$tmp/venv/bin/pip" install --no-index \
     "$SRC" >"$tmp/pip.log" 2>&1; then
  echo "FAIL: pip install $SRC"; tail -40 "$tmp/pip.log"; exit 1
fi
cd "$tmp"
PYTHONPATH= "$tmp/venv/bin/python" - "$tmp/venv" <<'PYEOF'
import sys
import numpy as np
import adacomp
import adacomp.torch  # noqa: F401 - the DDP hook imports too
venv = sys.argv[1]
assert adacomp.__file__.startswith(venv + "/"), f"imported from {adacomp.__file__}, not {venv}"
g = np.random.default_rng(0).standard_normal(100_000).astype(np.float32)
c = adacomp.Compressor(g.size, bin_size=500)
frame = c.compress(g)
out = np.zeros_like(g)
adacomp.decompress_add(frame, out)
err = np.abs(out + c.residue - g).max()
assert err <= 1e-6 * np.abs(g).max(), f"frame + residue differs from the gradient by {err}"
rate = g.nbytes / len(frame)
assert rate > 20, f"compression rate {rate:.1f}"
print(f"ok: installed {adacomp.__version__} at {adacomp.__file__}; rate {rate:.1f}x, "
      f"conservation error {err:.2e}")
PYEOF
