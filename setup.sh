#!/usr/bin/env bash
# posenc set-up on Debian 12: installs what is missing (Debian packages only), builds, and runs.
#
#   ./setup.sh run    build (Release, g++) and run the main job: posenc report (an HTML page with
#                     every figure, table and check for Llama 2 7B extended 16x with YaRN)
#   ./setup.sh test   build (Release, g++) and run the whole test suite with ctest
#   ./setup.sh asan   build with clang++ under AddressSanitizer + UndefinedBehaviorSanitizer, test
#   ./setup.sh clang  build with clang++ (Release) and test
#
# Nothing is downloaded except Debian packages through apt.
set -euo pipefail
cd "$(dirname "$0")"

mode=${1:-run}
packages=(cmake ninja-build g++ nlohmann-json3-dev libcli11-dev libfmt-dev libhwy-dev libsleef-dev
          libgtest-dev libgmock-dev libbenchmark-dev libxml2-utils
          pybind11-dev python3-dev python3-numpy)  # the Python package (python/)
case "$mode" in
  asan) packages+=(clang libclang-rt-14-dev chromium fonts-dejavu-core python3-torch libopenblas0-pthread libtorch-dev python3-pytest clang-format-14) ;;
  clang) packages+=(clang libclang-rt-14-dev python3-torch libopenblas0-pthread libtorch-dev python3-pytest) ;;
  # browser: the HTML report; torch + pytest: the Python package's tests and hf numerics against
  # torch (libtorch-dev: the package's fast torch tensor reader; libopenblas0-pthread: the BLAS
  # Debian's torch calls, about 10x the reference BLAS in training); clang-format: the format check
  test) packages+=(chromium fonts-dejavu-core python3-torch libopenblas0-pthread libtorch-dev python3-pytest clang-format-14) ;;
  run) ;;
  *) echo "usage: ./setup.sh run|test|asan|clang" >&2; exit 2 ;;
esac

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}" >&2
  sudo=""
  [ "$(id -u)" -ne 0 ] && sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

case "$mode" in
  run)
    cmake --workflow --preset release >&2
    ./build/release/cli/posenc report -o report.html
    echo "open report.html in a browser; for the per-pair table alone:" >&2
    ./build/release/cli/posenc inspect examples/configs/llama-2-7b-yarn16.json
    ;;
  test) cmake --workflow --preset test ;;
  asan) cmake --workflow --preset asan ;;
  clang) cmake --workflow --preset clang ;;
esac
