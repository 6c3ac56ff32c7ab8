# Sourced by the cluster tests after they set CLUSTER, ADACOMP and PREFIX
# (one letter): skips (exit 77) without the data set, gives the test a
# cluster name of its own (concurrent runs do not collide), a scratch
# directory $TMP, `c ARGS...` to run cluster.sh on that cluster (time-bounded
# by ${T:-30} s), and removes both at exit.
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "skip: Fashion-MNIST not installed"; exit 77
fi
export PATH="$PATH:/usr/sbin:/sbin"
NAME="${PREFIX}$(( $$ % 100000 ))t"
TMP="$(mktemp -d)"
c() { timeout -k 5 "${T:-30}" bash "$CLUSTER" --name "$NAME" "$@"; }
trap 'c down >/dev/null 2>&1; rm -rf "$TMP"' EXIT
fail=0
