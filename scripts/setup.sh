#!/usr/bin/env bash
# Installs what the build and the tests need, from Debian's packages.
# Idempotent: quiet when everything is there; `apt-get update` only when something is missing.
set -euo pipefail

packages=(
  cmake ninja-build ccache g++ pkg-config
  nlohmann-json3-dev libfmt-dev libcli11-dev
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  llvm-19-dev clang-19 libclang-rt-19-dev
  graphviz python3
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
