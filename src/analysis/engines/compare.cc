// engines.h's public part: one engine's view (each engine in its own file), the verdicts, the
// rounding budget and compare_engines.
#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <utility>

#include "analysis/doctor_mrope.h"
#include "analysis/engines/engines_internal.h"
#include "core/ggml_model.h"
#include "core/max_nan.h"
#include "core/methods.h"
#include "posenc/analysis/engines.h"
#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"
#include "posenc/core/ggml.h"
#include "util/format.h"

namespace posenc {
namespace {

using engines_detail::add_variant_notes;
using engines_detail::finish;
using engines_detail::kFloat32Unit;
using engines_detail::llama_cpp_view;
using engines_detail::transformers_view;
using engines_detail::vllm_view;

std::string sci(double v) { return detail::sci(v, 1); }
std::string short_num(double v) { return detail::sig(v, 6); }

bool scalar_differs(double a, double b) {
  return !(std::abs(a - b) <= kScalarTolerance * std::max(std::abs(a), std::abs(b)));
}

void judge(EngineComparison& c, const EngineComparison& reference) {
  const EngineView& v = c.view;
  if (!v.supported) {
    c.verdict = Verdict::kUnsupported;
    c.verdict_text = "not supported: " + v.unsupported_reason;
    return;
  }
  c.attention_factor_differs = scalar_differs(v.attention_factor, reference.view.attention_factor);
  c.softmax_scale_differs =
      scalar_differs(v.softmax_scale_multiplier, reference.view.softmax_scale_multiplier);
  std::vector<std::string> reasons;
  if (c.pairs_differing > 0) {
    reasons.push_back("differs in " + std::to_string(c.pairs_differing) +
                      (c.pairs_differing == 1 ? " pair" : " pairs") + " by up to " +
                      sci(c.max_relative_difference_beyond) + " (inv_freq, relative)");
  }
  if (c.attention_factor_differs) {
    reasons.push_back("uses a different attention factor (" + short_num(v.attention_factor) +
                      " vs " + short_num(reference.view.attention_factor) + ")");
  }
  if (c.softmax_scale_differs) {
    reasons.push_back("uses a different softmax-scale multiplier (" +
                      short_num(v.softmax_scale_multiplier) + " vs " +
                      short_num(reference.view.softmax_scale_multiplier) + ")");
  }
  if (reasons.empty()) {
    c.verdict = Verdict::kAgrees;
    c.verdict_text = v.engine == Engine::kPrecise
                         ? std::string("reference (float64)")
                         : "agrees (float32 rounding only: inv_freq within " +
                               sci(c.max_relative_difference) + ")";
    return;
  }
  c.verdict = Verdict::kDiffers;
  for (const auto& r : reasons) c.verdict_text += (c.verdict_text.empty() ? "" : "; ") + r;
}

}  // namespace

std::string_view engine_name(Engine engine) {
  switch (engine) {
    case Engine::kTransformers:
      return "transformers";
    case Engine::kLlamaCpp:
      return "llama.cpp";
    case Engine::kVllm:
      return "vllm";
    case Engine::kPrecise:
      return "precise";
  }
  return "?";
}

std::string_view verdict_name(Verdict verdict) {
  switch (verdict) {
    case Verdict::kAgrees:
      return "agrees";
    case Verdict::kDiffers:
      return "differs";
    case Verdict::kUnsupported:
      return "unsupported";
  }
  return "?";
}

EngineView engine_view(const RopeSpec& spec, Engine engine, std::int64_t seq_len,
                       std::string_view model_type) {
  validate(spec);
  if (seq_len < 0) throw Error("seq_len (" + std::to_string(seq_len) + ") must not be negative");
  EngineView engine_specific;
  switch (engine) {
    case Engine::kTransformers:
      engine_specific = transformers_view(spec, seq_len);
      break;
    case Engine::kLlamaCpp:
      engine_specific = llama_cpp_view(spec, seq_len, model_type);
      break;
    case Engine::kVllm:
      engine_specific = vllm_view(spec, seq_len, model_type);
      break;
    case Engine::kPrecise:
      break;
  }
  if (engine != Engine::kPrecise) {
    add_variant_notes(engine_specific, spec, model_type);
    return engine_specific;
  }
  EngineView v;
  v.engine = Engine::kPrecise;
  v.freqs = compute_frequencies(spec, Numerics::kPrecise, seq_len);
  finish(v, seq_len);
  return v;
}

std::vector<std::int64_t> default_comparison_positions(const RopeSpec& spec) {
  const ContextLengths ctx = context_lengths(spec);
  const std::int64_t L = ctx.original;
  const std::int64_t extended = std::max(ctx.extended, L);
  std::vector<std::int64_t> p = {L - 1, L, 4 * L, extended - 1};
  constexpr std::int64_t kLast =
      std::numeric_limits<std::int32_t>::max();  // ggml's int32 positions
  for (std::int64_t& x : p) x = std::min(x, kLast);
  std::sort(p.begin(), p.end());
  p.erase(std::unique(p.begin(), p.end()), p.end());
  return p;
}

double rounding_budget(const EngineView& view, const RopeSpec& spec, std::int64_t pair) {
  const Frequencies& f = view.freqs;
  if (f.numerics == Numerics::kPrecise) return 0.0;
  const double D = 2.0 * static_cast<double>(f.pair_count());
  const double e = 2.0 * static_cast<double>(pair) / D;
  const double b = f.base > 1.0 ? f.base : spec.rope_theta;
  const double s = std::max({1.0, spec.factor, f.scale});
  const double ln_b = std::log(b);
  if (f.numerics == Numerics::kGgml) {
    return kFloat32Unit * (e * ln_b + 2.0 * static_cast<double>(pair) + 8.0 + 2.0 * s);
  }
  return kFloat32Unit * (e * (ln_b + 1.0) + 8.0 + 2.0 * s);
}

std::vector<double> relative_differences(const Frequencies& freqs, const Frequencies& reference) {
  if (freqs.inv_freq.size() != reference.inv_freq.size()) {
    throw Error("relative_differences: pair counts differ (" +
                std::to_string(freqs.inv_freq.size()) + " vs " +
                std::to_string(reference.inv_freq.size()) + ")");
  }
  std::vector<double> d(freqs.inv_freq.size());
  for (std::size_t i = 0; i < d.size(); ++i) {
    const double a = freqs.inv_freq[i];
    const double r = reference.inv_freq[i];
    if (r == 0.0) {
      d[i] = a == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
    } else {
      d[i] = std::abs(a - r) / std::abs(r);
    }
  }
  return d;
}

double max_cos_sin_difference(const Frequencies& freqs, const Frequencies& reference,
                              std::int64_t position) {
  const std::size_t n = reference.inv_freq.size();
  if (freqs.inv_freq.size() != n) {
    throw Error("max_cos_sin_difference: pair counts differ (" +
                std::to_string(freqs.inv_freq.size()) + " vs " + std::to_string(n) + ")");
  }
  std::vector<double> c(n), s(n), cr(n), sr(n);
  cos_sin_at(freqs, position, c, s);
  cos_sin_at(reference, position, cr, sr);
  double worst = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    worst = detail::max_nan(worst, detail::max_nan(std::abs(c[i] - cr[i]), std::abs(s[i] - sr[i])));
  }
  return worst;
}

const EngineComparison& Comparison::at(Engine engine) const {
  for (const auto& e : engines) {
    if (e.view.engine == engine) return e;
  }
  throw Error("compare_engines: no result for engine " + std::string(engine_name(engine)));
}

void check_seq_len_covers(std::int64_t seq_len, std::span<const std::int64_t> positions,
                          std::string_view seq_len_name, std::string_view positions_name) {
  if (seq_len <= 0 || positions.empty()) return;
  const std::int64_t largest = *std::max_element(positions.begin(), positions.end());
  if (largest < seq_len) return;
  const std::string seq(seq_len_name);
  throw Error(seq + " (" + std::to_string(seq_len) + ") must exceed the largest of " +
              std::string(positions_name) + " (" + std::to_string(largest) +
              "): it is the largest position + 1 (or give " + seq + " 0, at initialisation)");
}

Comparison compare_engines(const RopeSpec& spec, std::int64_t seq_len,
                           std::span<const std::int64_t> positions, std::string_view model_type) {
  check_seq_len_covers(seq_len, positions);
  Comparison out;
  out.spec = spec;
  out.model_type = std::string(model_type);
  out.seq_len = seq_len;
  out.positions = positions.empty() ? default_comparison_positions(spec)
                                    : std::vector<std::int64_t>(positions.begin(), positions.end());
  for (const std::int64_t p : out.positions) {
    if (p < 0 || p > std::numeric_limits<std::int32_t>::max()) {
      throw Error("position (" + std::to_string(p) +
                  ") must be between 0 and 2^31 - 1 (ggml's int32 positions)");
    }
  }
  for (const Engine e : kEngines) {
    EngineComparison c;
    c.view = engine_view(spec, e, seq_len, model_type);
    mrope_doctor::add_engine_notes(spec, model_type, c.view);
    out.engines.push_back(std::move(c));
  }
  const EngineComparison& ref = out.engines.back();  // precise, last in kEngines
  for (EngineComparison& c : out.engines) {
    const Frequencies& f = c.view.freqs;
    if (f.inv_freq.size() == ref.view.freqs.inv_freq.size()) {
      c.relative_difference = relative_differences(f, ref.view.freqs);
      c.budget.resize(c.relative_difference.size());
      for (std::size_t i = 0; i < c.budget.size(); ++i) {
        c.budget[i] = rounding_budget(c.view, spec, static_cast<std::int64_t>(i));
        const double d = c.relative_difference[i];
        c.max_relative_difference = detail::max_nan(c.max_relative_difference, d);
        if (!(d <= c.budget[i])) {  // NaN counts as beyond
          ++c.pairs_differing;
          c.max_relative_difference_beyond = detail::max_nan(c.max_relative_difference_beyond, d);
        }
      }
      for (const std::int64_t p : out.positions) {
        c.cos_sin_difference.push_back(max_cos_sin_difference(f, ref.view.freqs, p));
      }
    }
    judge(c, ref);
  }
  return out;
}

}  // namespace posenc
