#!/usr/bin/env bash
# Installs the xlens Python package into a fresh virtual environment (default build/python-venv)
# from this clone, reusing the build tree scripts/build.sh made: scikit-build-core configures
# build/ again and builds only the extension, nothing when the tree is up to date. The venv sees
# the system's site packages (numpy, and TensorFlow and JAX for the tests) but not the tree.
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-build/python-venv}"
# Only an earlier virtual environment is replaced, never a folder that is something else.
if [ -e "$venv" ] && [ ! -f "$venv/pyvenv.cfg" ]; then
  echo "install_python_package: $venv exists and is not a virtual environment; give another path" >&2
  exit 1
fi
rm -rf "$venv"
python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-build-isolation \
  --no-deps . 2>&1 | grep -v "as the 'root' user" || true
"$venv/bin/python" -c "import xlens; print('python package: xlens', xlens.__version__, 'in', '$venv')"
