# Sourced (not run) by scripts/sanitize.sh, tsan.sh and nosimd.sh, which each
# build the project once more into a folder of their own and test it there.
# Sets ROOT (the repository), JOBS (default nproc) and GEN (Ninja where it is
# installed), and defines side_build.

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
JOBS=${JOBS:-$(nproc)}
GEN=()
if command -v ninja >/dev/null 2>&1; then GEN=(-G Ninja); fi

# side_build DIR CMAKE_OPTION... [-- BUILD_OPTION...]
# Configures the repository into DIR with the CMake options (cmake's output
# hidden), then builds it with JOBS jobs, passing the options after -- (such
# as --target NAME...) to cmake --build.
side_build() {
  local dir=$1 options=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do
    options+=("$1")
    shift
  done
  if [ $# -gt 0 ]; then shift; fi
  cmake -S "$ROOT" -B "$dir" "${GEN[@]}" "${options[@]}" >/dev/null
  cmake --build "$dir" -j "$JOBS" "$@"
}
