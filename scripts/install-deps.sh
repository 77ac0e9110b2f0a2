#!/usr/bin/env bash
# Installs spate's build and test dependencies from Debian's packages and PyPI.
# Idempotent: packages already present are skipped by apt-get / pip.
set -euo pipefail

APT_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-program-options1.81-dev
  libspdlog-dev libfmt-dev libpcre2-dev libssl-dev libsystemd-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  python3-jinja2 curl openssl dpkg-dev ccache
  clang libclang-rt-14-dev
  chromium chromium-driver fonts-dejavu-core haproxy
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

if [ "${#missing[@]}" -gt 0 ]; then
  echo "[install-deps] installing: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "[install-deps] all Debian packages present"
fi
