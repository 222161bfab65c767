#!/usr/bin/env bash
# Installs what building and testing kplane needs, when it is missing:
#  - librocksdb-dev (the rocksdb crate links Debian's RocksDB 7.8 via .cargo/config.toml,
#    instead of compiling RocksDB from C++ for half an hour), libclang-dev for bindgen;
#  - with `test`: kubectl is expected on PATH for the end-to-end tests, curl is installed
#    (a REST client of the tests), openssl (it makes the version 1 client certificates a test
#    presents), and the Python `kubernetes` client is installed into .venv.
set -euo pipefail

missing=()
dpkg -s librocksdb-dev >/dev/null 2>&1 || missing+=(librocksdb-dev)
dpkg -s libclang-dev >/dev/null 2>&1 || missing+=(libclang-dev)
dpkg -s libsnappy-dev >/dev/null 2>&1 || missing+=(libsnappy-dev)
if [ "${1:-}" = test ]; then
  command -v curl >/dev/null 2>&1 || missing+=(curl)
  command -v openssl >/dev/null 2>&1 || missing+=(openssl)
fi
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ "${1:-}" != test ]; then
  exit 0
fi

# For the tests only (`setup.sh test`): kubectl and the official Kubernetes Python client
# (tests/python/client_test.py).
command -v kubectl >/dev/null || echo "setup: warning: kubectl is not on PATH; the kubectl tests will fail" >&2
cd "$(dirname "$0")/.."
requirements=tests/python/requirements.txt
if ! cmp -s "$requirements" .venv/.installed 2>/dev/null; then
  echo "setup: installing the Python client into .venv" >&2
  python3 -m venv .venv
  .venv/bin/pip install -q --disable-pip-version-check -r "$requirements"
  cp "$requirements" .venv/.installed
fi
