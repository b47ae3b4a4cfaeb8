#!/usr/bin/env bash
# Every `posenc plot` kind, written to files and checked by xmllint (Debian's libxml2-utils), an
# XML parser that shares nothing with posenc or with the checker in figures_test.cc.
#   xmllint_plots.sh POSENC OUT_DIR
# Without xmllint the test is skipped (exit 0) unless CI is set (and not "false" or "0"), where a missing tool fails.
set -euo pipefail
posenc=$1
out=$2

if ! command -v xmllint >/dev/null 2>&1; then
  case "${CI:-}" in ""|false|0) ci="" ;; *) ci=1 ;; esac
  if [ -n "$ci" ]; then
    echo "xmllint_plots: FAIL: xmllint is not installed and CI is set (apt-get install libxml2-utils)" >&2
    exit 1
  fi
  echo "xmllint_plots: SKIPPED: xmllint is not installed (apt-get install libxml2-utils, or ./setup.sh test)"
  exit 0
fi

mkdir -p "$out"
files=()
for kind in sinusoidal similarity wavelengths yarn-ramp decay attention-factor; do
  "$posenc" plot "$kind" -o "$out/$kind.svg"
  files+=("$out/$kind.svg")
done
"$posenc" plot sinusoidal --positions 200 --d-model 150 -o "$out/sinusoidal-200x150.svg"
"$posenc" plot wavelengths --preset phi-3-mini-128k -o "$out/wavelengths-phi3.svg"
"$posenc" plot attention-factor --preset deepseek-v3 -o "$out/attention-factor-deepseek.svg"
files+=("$out/sinusoidal-200x150.svg" "$out/wavelengths-phi3.svg" "$out/attention-factor-deepseek.svg")

xmllint --noout "${files[@]}"
echo "xmllint_plots: ${#files[@]} files well-formed"
