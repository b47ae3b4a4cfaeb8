// posenc/report/report.h: one self-contained HTML page about a model's positional encoding.
//
// The page holds, in order: the model summary; every figure of figures.h (inline SVG); the
// per-pair table of `posenc inspect` (pair, inv_freq, wavelength, r = L/λ0, interpolation
// weight, ratio, treatment); the engine comparison of engines.h (transformers, llama.cpp, vLLM
// against the float64 formulas); and the seed's claims as measured by verify_claims().
//
// Self-contained means: inline CSS, inline SVG, one inline script and nothing else. No URL is
// referenced (the only "http" in the file is the SVG namespace name), no font is loaded, no
// <link>, <img> or <script src>. The layout is readable on a laptop (max-width column, figures
// scale with viewBox) and in print (@media print: no backgrounds, one section per page, figures
// and table rows never split). The inline script measures every <svg> once the page is laid out
// and writes "figures: N, all non-zero" (or which ones are empty) into the element with id
// "selfcheck", so a headless browser can check the rendering.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/analysis/verify.h"
#include "posenc/io/config.h"

namespace posenc {

struct ReportOptions {
  std::string model_name;  // shown in titles ("Llama 2 7B + YaRN ×16")
  ModelConfig config;      // the model (its spec, source, warnings)
  bool compare = true;     // include compare_engines() (engines.h); false: the section says so
  VerifyOptions verify;
  std::string generator = "posenc";  // "posenc 0.3.0": written in the footer
  // Called with a short message before each step ("figure: wavelengths"); may be empty.
  std::function<void(std::string_view)> progress;
};

// The HTML page. Throws Error when the model's spec is invalid, has more than
// figures::kMaxDecayPairs rotated pairs, or options.verify is outside verify_claims' limits.
std::string html_report(const ReportOptions& options);

}  // namespace posenc
