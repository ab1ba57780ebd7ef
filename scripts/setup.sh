#!/usr/bin/env bash
# Installs what the build needs, from Debian's packages, and with --test-peers also the Python
# packages some tests compare against (jax, jaxlib, numpy, tensorflow-cpu from PyPI).
# Idempotent: quiet when everything is there; `apt-get update` only when something is missing.
set -euo pipefail

packages=(
  cmake ninja-build ccache g++ lld pkg-config
  nlohmann-json3-dev libfmt-dev libcli11-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  llvm-19-dev clang-19 libclang-rt-19-dev
  graphviz python3 python3-dev python3-venv libeigen3-dev zlib1g-dev
  libre2-dev
  liblapack-dev libblas-dev  # jax's LAPACK custom calls (lapack_thunk.cc)
  libarchive-dev  # bug bundles (xlens bundle, xlens replay)
  libboost-context-dev  # the GPU simulator's fibers (optional at build time)
  openmpi-bin libopenmpi-dev  # xlens run --distributed=mpi under mpirun (optional at build time)
  libdnnl-dev  # oneDNN: dots and convolutions with kernels chosen for the CPU at run time (optional)
  libprotobuf-dev protobuf-compiler
  qt6-base-dev qt6-svg-dev libgraphviz-dev fonts-dejavu-core
  dataset-fashion-mnist  # the samples' training images (IDX files under /usr/share/datasets)
)

# The peers the tests compare against (XLA's parser from jaxlib, NumPy, TensorFlow). Optional: the tests that
# need them skip with the reason when they cannot be installed.
test_peers=false
if [ "${1:-}" = "--test-peers" ]; then test_peers=true; fi
# Ahead-of-time objects for aarch64 are linked by the cross compiler and run under qemu-user
# (tests/aot; skipped without them).
$test_peers && packages+=(g++-aarch64-linux-gnu qemu-user)

# The Python package's build (its extension is built with the tree when nanobind is there) and
# its tests (pytest, run in a fresh virtual environment the package is installed into).
install_python_package_deps() {
  command -v python3 >/dev/null || return 0
  local wanted="nanobind scikit-build-core"
  $test_peers && wanted="$wanted pytest"
  local module missing=""
  for module in $wanted; do
    python3 -c "import ${module//-/_}" 2>/dev/null || missing="$missing $module"
  done
  [ -z "$missing" ] && return 0
  echo "setup: installing$missing from PyPI (the Python package's build and tests)"
  python3 -m pip install --quiet --disable-pip-version-check $missing 2>&1 | grep -v "as the 'root' user" ||
    true
}

install_python_peers() {
  $test_peers || return 0
  command -v python3 >/dev/null || return 0
  if ! python3 -c "import jaxlib, numpy" 2>/dev/null; then
    echo "setup: installing jax, jaxlib and numpy from PyPI (for the compatibility tests)"
    python3 -m pip install --quiet --disable-pip-version-check jax jaxlib numpy 2>&1 | grep -v "as the 'root' user" ||
      true
    python3 -c "import jaxlib, numpy" 2>/dev/null ||
      echo "setup: jaxlib/numpy unavailable; the XLA compatibility tests will be skipped" >&2
  fi
  if ! python3 -c "import tensorflow" 2>/dev/null; then
    echo "setup: installing tensorflow-cpu 2.21 from PyPI (for the TensorFlow compatibility tests)"
    python3 -m pip install --quiet --disable-pip-version-check "tensorflow-cpu==2.21.*" 2>&1 |
      grep -v "as the 'root' user" || true
    python3 -c "import tensorflow" 2>/dev/null ||
      echo "setup: tensorflow unavailable; the TensorFlow compatibility tests will be skipped" >&2
  fi
}

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  install_python_package_deps
  install_python_peers
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
install_python_package_deps
install_python_peers
echo "setup: done"
