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
# The M-RoPE kinds need a VL model: Qwen2.5-VL-7B-Instruct's RoPE keys, and Qwen3-VL-8B's.
cat >"$out/qwen2.5-vl.json" <<'EOF'
{"model_type": "qwen2_5_vl", "hidden_size": 3584, "num_attention_heads": 28,
 "max_position_embeddings": 128000, "rope_theta": 1000000.0,
 "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
EOF
cat >"$out/qwen3-vl.json" <<'EOF'
{"model_type": "qwen3_vl", "text_config": {"head_dim": 128, "hidden_size": 4096,
 "num_attention_heads": 32, "max_position_embeddings": 262144, "rope_theta": 5000000,
 "rope_scaling": {"rope_type": "default", "mrope_section": [24, 20, 20], "mrope_interleaved": true}}}
EOF
for model in qwen2.5-vl qwen3-vl; do
  for kind in axis-map mrope-positions; do
    "$posenc" plot "$kind" "$out/$model.json" -o "$out/$kind-$model.svg"
    files+=("$out/$kind-$model.svg")
  done
done

xmllint --noout "${files[@]}"
echo "xmllint_plots: ${#files[@]} files well-formed"
