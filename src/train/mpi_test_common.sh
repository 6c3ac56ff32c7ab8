# Sourced by train_mpi_test.sh and train_mpi_failure_test.sh: skips the test
# when Fashion-MNIST is not installed, makes $TMP (removed at exit), and sets
# MPI_FLAGS: loopback only, shared memory between the ranks, the launcher on
# lo; root allowed (CI runs as root) and more ranks than cores.
if [ ! -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ]; then
  echo "skip: Fashion-MNIST not installed"; exit 0
fi
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
MPI_FLAGS=(--oversubscribe --allow-run-as-root --bind-to none --mca btl self,vader
           --mca btl_vader_single_copy_mechanism none --mca oob_tcp_if_include lo)
