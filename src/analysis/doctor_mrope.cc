// The M-RoPE checks of posenc/analysis/doctor.h and compare's M-RoPE notes. Engine facts:
// ../shared/docs/rope-in-engines.md §1 (vLLM mrope.py, ggml_mrope_cache_init) and §5 (sglang#33117,
// transformers#45381 / #48669, vllm#25384).
#include "analysis/doctor_mrope.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/max_nan.h"
#include "posenc/core/cos_sin.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/mrope_positions.h"
#include "posenc/io/vision_config.h"
#include "rope/kernels/half.h"
#include "util/format.h"

namespace posenc::mrope_doctor {
namespace {

using detail::sci;
using detail::sig;

constexpr double kTwoPi = 2.0 * std::numbers::pi;

double bf16(double v) {
  return static_cast<double>(detail::f32_from_bf16(detail::bf16_from_f32(static_cast<float>(v))));
}

Finding make(std::string id, std::string severity, std::string title, std::string detail,
             std::string advice) {
  return {std::move(id), std::move(severity), std::move(title), std::move(detail),
          std::move(advice)};
}

std::string ids_text(const MropePositions& p, std::int64_t token) {
  const auto u = static_cast<std::size_t>(token);
  return "(t, h, w) = (" + std::to_string(p.ids[0][u]) + ", " + std::to_string(p.ids[1][u]) + ", " +
         std::to_string(p.ids[2][u]) + ")";
}

std::string list_text(const std::vector<std::int64_t>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// bf16-rounded cos/sin over the 64 positions below the extended context.
struct Bf16Cache {
  std::int64_t first = 0, last = 0;
  double value_error = 0;  // largest |bf16(x) - x| over cos and sin (attention factor included)
  double angle_error = 0;  // largest |atan2(bf16 sin, bf16 cos) - angle| (rad)
  double slowest = 0;      // the smallest inv_freq > 0 (rad per token)
};

Bf16Cache bf16_cache(const RopeSpec& s) {
  Bf16Cache r;
  const std::int64_t ext = extended_context(s);
  const Frequencies f = compute_frequencies(s, Numerics::kPrecise, ext);
  const std::size_t n = f.inv_freq.size();
  std::vector<double> co(n), si(n);
  r.first = std::max<std::int64_t>(0, ext - 64);
  r.last = ext - 1;
  for (std::int64_t p = r.first; p <= r.last; ++p) {
    cos_sin_at(f, p, co, si);  // every axis at p: the one-axis row
    for (std::size_t i = 0; i < n; ++i) {
      const double cb = bf16(co[i]), sb = bf16(si[i]);
      r.value_error = detail::max_nan(r.value_error,
                                      detail::max_nan(std::abs(cb - co[i]), std::abs(sb - si[i])));
      const double d = std::remainder(std::atan2(sb, cb) - std::atan2(si[i], co[i]), kTwoPi);
      r.angle_error = detail::max_nan(r.angle_error, std::abs(d));
    }
  }
  for (const double w : f.inv_freq) {
    if (w > 0 && (r.slowest == 0 || w < r.slowest)) r.slowest = w;
  }
  return r;
}

std::string bf16_cache_numbers(const RopeSpec& s) {
  const Bf16Cache b = bf16_cache(s);
  return "at positions " + std::to_string(b.first) + " .. " + std::to_string(b.last) +
         " bf16 cos/sin are off by up to " + sci(b.value_error, 2) + ", an angle error of up to " +
         sci(b.angle_error, 2) + " rad (" +
         sig(b.slowest > 0 ? b.angle_error / b.slowest : 0.0, 4) +
         " positions' worth in the slowest pair)";
}

// Pairs llama.cpp's IMROPE reads from the fourth axis e while transformers reads another.
std::vector<std::int64_t> imrope_e_pairs(const RopeSpec& s) {
  std::vector<std::int64_t> out;
  if (s.axis_map.rule != AxisRule::kInterleaved) return out;
  for (std::int64_t j = 0; j < pair_count(s); ++j) {
    if (ggml_imrope_axis(s.axis_map, j) == 3 && slot_axis(s.axis_map, j) != 3) out.push_back(j);
  }
  return out;
}

// The e pairs' angle at `position` (text: llama.cpp rotates them by 0).
double unrotated_angle(const Frequencies& f, const std::vector<std::int64_t>& pairs,
                       std::int64_t position) {
  double worst = 0;
  for (const std::int64_t j : pairs) {
    const double a = std::remainder(
        static_cast<double>(position) * f.inv_freq[static_cast<std::size_t>(j)], kTwoPi);
    worst = detail::max_nan(worst, std::abs(a));
  }
  return worst;
}

std::optional<MropeVision> vision_of(std::string_view model_type, const DoctorOptions& o) {
  if (o.vision) return o.vision;
  const std::optional<MropeModel> m = mrope_model_for_type(model_type);
  if (!m) return std::nullopt;
  MropeVision v;
  v.model = *m;
  v.spatial_merge_size = kDefaultSpatialMergeSize;
  v.tokens_per_second = kQwen25VlDefaultTokensPerSecond;
  return v;
}

std::int64_t segment_tokens(const MropeSegment& g, std::int64_t merge) {
  if (g.kind == MropeSegmentKind::kText) return g.tokens;
  return g.t * (g.h / merge) * (g.w / merge);
}

// "segment 4 (video:16x28x28@2)" for the segment holding `token`.
std::string segment_of(std::span<const MropeSegment> layout, std::int64_t merge,
                       std::int64_t token) {
  std::int64_t start = 0;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const std::int64_t n = segment_tokens(layout[i], merge);
    if (token < start + n) {
      return "segment " + std::to_string(i + 1) + " (" + mrope_segment_text(layout[i]) +
             "), its token " + std::to_string(token - start);
    }
    start += n;
  }
  return "the end of the layout";
}

// ---------------------------------------------------------------------------------------------

void bf16_cache_finding(const ModelConfig& c, std::vector<Finding>& out) {
  const RopeSpec& s = c.spec;
  if (axis_count(s) <= 1) return;
  const std::int64_t ext = extended_context(s);
  const float pf = static_cast<float>(ext - 1);
  const double pb = bf16(pf);
  out.push_back(make(
      "mrope-bf16-cache", "info",
      "M-RoPE paths of vLLM and SGLang keep the cos/sin cache in bf16 (" + std::to_string(ext) +
          " tokens)",
      "vLLM's MRotaryEmbedding casts its float32 cos/sin cache (4 x max_position_embeddings "
      "positions, for long videos) to the query dtype (_match_cos_sin_cache_dtype) and rotates in "
      "that dtype; SGLang did the same on the first forward (sglang#33117), unlike its text "
      "models. For this model " +
          bf16_cache_numbers(s) +
          ". transformers computes the angles in float32 with autocast off and casts only cos/sin "
          "to the activation dtype. Worse is a position held in bf16 (candle#3520): position " +
          std::to_string(ext - 1) + " becomes " + detail::shortest(pb) + ".",
      "Keep the cache and the rotation in float32 (posenc's kernels compute cos/sin in float32 "
      "for bf16 q and k); compare with posenc apply --dtype bf16 on the same positions."));
}

void position_rule_finding(const std::optional<MropeVision>& vision,
                           std::span<const MropeSegment> layout, bool given,
                           std::vector<Finding>& out) {
  if (!vision) return;
  const MropePositions a = mrope_positions(layout, *vision, MropeRule::kHf45);
  const MropePositions b = mrope_positions(layout, *vision, MropeRule::kHf53);
  const std::optional<std::int64_t> first = mrope_first_difference(a, b);
  const std::string where = std::string(given ? "the layout " : "the representative layout ") +
                            mrope_layout_text(layout) + " (" + std::to_string(a.tokens()) +
                            " tokens, " + std::string(mrope_model_name(vision->model)) + ")";
  const std::string rules =
      "hf-4.5 is transformers <= 4.57, vLLM and llama.cpp (a vision block and the text after it "
      "start at the largest id so far + 1); hf-5.3 is the transformers v5 walk over "
      "mm_token_type_ids (the text after a block resumes at its start + max(H', W'), below the "
      "block's largest id after a long video).";
  if (!first) {
    out.push_back(make("mrope-position-rule", "info",
                       "the hf-4.5 and hf-5.3 position rules agree on " + where,
                       rules + " For " + where + " every id and rope_deltas (" +
                           std::to_string(a.rope_deltas) + ") are the same.",
                       "Nothing to do for this prompt; check a prompt of yours with posenc doctor "
                       "--layout or posenc mrope-positions."));
    return;
  }
  std::int64_t worst = 0;
  for (std::int64_t j = *first; j < std::min(a.tokens(), b.tokens()); ++j) {
    for (int axis = 0; axis < 3; ++axis) {
      const auto u = static_cast<std::size_t>(j);
      worst = std::max(worst, std::abs(a.ids[axis][u] - b.ids[axis][u]));
    }
  }
  out.push_back(make(
      "mrope-position-rule", "warning",
      "hf-4.5 and hf-5.3 give other position ids from token " + std::to_string(*first) + " of " +
          where,
      rules + " Token " + std::to_string(*first) + " (" +
          segment_of(layout, vision->spatial_merge_size, *first) + ") gets " + ids_text(a, *first) +
          " under hf-4.5 and " + ids_text(b, *first) +
          " under hf-5.3; from there on the ids differ by up to " + std::to_string(worst) +
          ", and rope_deltas is " + std::to_string(a.rope_deltas) + " vs " +
          std::to_string(b.rope_deltas) + " (every decode position differs by " +
          std::to_string(std::abs(a.rope_deltas - b.rope_deltas)) + ").",
      "Serve with the rule the model was trained and evaluated with (transformers 4.x: hf-4.5, "
      "as vLLM and llama.cpp do); posenc mrope-positions --rule shows both for your prompt."));
}

void fractional_seconds_finding(const std::optional<MropeVision>& vision,
                                std::span<const MropeSegment> layout, bool given,
                                std::vector<Finding>& out) {
  if (!vision || vision->model != MropeModel::kQwen25Vl) return;
  // The first video of the layout with a fractional S, else a probe: 8 groups at 0.5 s (4 fps
  // with temporal_patch_size 2).
  MropeSegment video{MropeSegmentKind::kVideo, 0, 8, 28, 28, 0.5};
  bool from_layout = false;
  for (const MropeSegment& g : layout) {
    if (g.kind == MropeSegmentKind::kVideo &&
        g.second_per_grid_t != std::trunc(g.second_per_grid_t)) {
      video = g;
      from_layout = given;
      break;
    }
  }
  const std::int64_t m = vision->spatial_merge_size;
  if (video.h % m != 0 || video.w % m != 0) return;  // mrope_positions refuses it in the rule check
  const MropeSegment one[] = {video};
  const MropePositions p = mrope_positions(one, *vision, MropeRule::kHf45);
  const std::int64_t group = (video.h / m) * (video.w / m);
  std::vector<std::int64_t> truncated, intended;
  for (std::int64_t k = 0; k < video.t; ++k) {
    truncated.push_back(p.ids[0][static_cast<std::size_t>(k * group)]);
    intended.push_back(static_cast<std::int64_t>(static_cast<double>(k) * video.second_per_grid_t *
                                                 vision->tokens_per_second));
  }
  std::vector<std::int64_t> distinct_t = truncated, distinct_i = intended;
  distinct_t.erase(std::unique(distinct_t.begin(), distinct_t.end()), distinct_t.end());
  distinct_i.erase(std::unique(distinct_i.begin(), distinct_i.end()), distinct_i.end());
  const double step = std::trunc(video.second_per_grid_t) * vision->tokens_per_second;
  out.push_back(make(
      "mrope-fractional-seconds", from_layout ? "warning" : "info",
      "a fractional second_per_grid_ts (" + detail::shortest(video.second_per_grid_t) +
          " s) is truncated to " + detail::shortest(std::trunc(video.second_per_grid_t)) + ": " +
          std::to_string(video.t) + " temporal groups get " + std::to_string(distinct_t.size()) +
          " distinct t",
      "Qwen2.5-VL's temporal id of group k is trunc(k x second_per_grid_t x tokens_per_second) "
      "with tokens_per_second " +
          detail::shortest(vision->tokens_per_second) +
          " here. transformers 4.52 to 4.57 put second_per_grid_ts through an int64 tensor and the "
          "v5 walk took int(second_per_grid_ts) (transformers#48669, fixed after it), so for " +
          mrope_segment_text(video) + (from_layout ? " (from the layout)" : " (a 4 fps video)") +
          " the step is " + detail::shortest(step) +
          " and the groups' t (relative to the block) "
          "are " +
          list_text(truncated) + " instead of " + list_text(intended) + " (" +
          std::to_string(distinct_i.size()) +
          " distinct, as transformers 4.49 and the #48669 fix compute them)" +
          (distinct_t.size() == 1 ? ": every frame of the video sits at one time" : "") + ".",
      "Sample videos at 2 fps or below (second_per_grid_ts >= 1 with temporal_patch_size 2), or "
      "run a transformers with #48669; check the ids with posenc mrope-positions."));
}

void yarn_finding(const ModelConfig& c, const Comparison& cmp, std::vector<Finding>& out) {
  const RopeSpec& s = c.spec;
  if (axis_count(s) <= 1 || !method_reads(s, kParamYarn)) return;
  const std::int64_t ext = extended_context(s);
  const Frequencies yarn = compute_frequencies(s, Numerics::kPrecise, ext);
  RopeSpec plain_spec = s;
  plain_spec.method = Method::kNone;
  plain_spec.factor = 1.0;
  const Frequencies plain = compute_frequencies(plain_spec, Numerics::kPrecise, ext);
  // Slots YaRN moves, per axis: the ramp runs over the global pair index, so the low-frequency
  // axes (w under contiguous sections) take most of the interpolation.
  std::int64_t moved[4] = {0, 0, 0, 0};
  std::int64_t total = 0;
  for (std::int64_t j = 0; j < pair_count(s); ++j) {
    if (yarn.interpolation_weight[static_cast<std::size_t>(j)] > 0) {
      ++moved[slot_axis(s.axis_map, j)];
      ++total;
    }
  }
  std::string per_axis;
  for (std::int64_t a = 0; a < axis_count(s); ++a) {
    per_axis += std::string(per_axis.empty() ? "" : ", ") + std::to_string(moved[a]) + " " +
                std::string(axis_name(s.axis_map, a));
  }
  std::string engines;
  bool differ = false;
  for (const EngineComparison& e : cmp.engines) {
    if (e.view.engine == Engine::kPrecise || e.view.freqs.inv_freq.empty()) continue;
    differ = differ || !e.view.supported || e.attention_factor_differs || e.pairs_differing > 0;
    engines += std::string(engines.empty() ? "" : "; ") + std::string(engine_name(e.view.engine)) +
               " attention factor " + sig(e.view.attention_factor, 7) + " (" +
               std::string(verdict_name(e.verdict)) + ")";
  }
  const double a = yarn.attention_factor;
  const std::int64_t at = ext - 1;
  out.push_back(make(
      "mrope-yarn", differ ? "warning" : "info",
      "YaRN with M-RoPE: every axis walks one YaRN ladder, attention factor " + sig(a, 7),
      "transformers builds the YaRN inv_freq and attention_scaling once and then splits the slots "
      "by axis; vLLM runs YaRN inside MRotaryEmbedding since PR #25384 (the Qwen3-VL change) and "
      "llama.cpp's ggml_rope_multi passes every axis through rope_yarn, so YaRN, freq_factors and "
      "the attention factor compose. YaRN moves " +
          std::to_string(total) + " of " + std::to_string(pair_count(s)) + " slots (" + per_axis +
          "). For this model: " + engines +
          ". An engine that drops YaRN on the M-RoPE path (vLLM before #25384) runs plain "
          "frequencies with factor 1: cos/sin up to " +
          sci(max_cos_sin_difference(plain, yarn, at), 2) + " away at position " +
          std::to_string(at) +
          "; one that keeps the frequencies but drops the attention factor scales cos/sin by 1 "
          "instead of " +
          sig(a, 7) + " (q.k by " + sig(1.0 / (a * a), 5) + " of what it should be).",
      differ ? "Use an engine whose numbers match transformers (posenc compare shows them), or "
               "set the attention factor explicitly where the engine allows it."
             : "Check that your engine's M-RoPE path is a version with YaRN (vLLM >= the "
               "release with #25384); posenc compare shows each engine's numbers."));
}

void imrope_finding(const ModelConfig& c, std::vector<Finding>& out) {
  const RopeSpec& s = c.spec;
  const std::vector<std::int64_t> pairs = imrope_e_pairs(s);
  if (pairs.empty()) return;
  const std::int64_t ext = extended_context(s);
  const Frequencies f = compute_frequencies(s, Numerics::kPrecise, ext);
  std::string list;
  for (const std::int64_t j : pairs) list += (list.empty() ? "" : ", ") + std::to_string(j);
  std::string sections;
  for (const std::int64_t v : s.axis_map.sections) {
    sections += (sections.empty() ? "" : ",") + std::to_string(v);
  }
  out.push_back(make(
      "imrope-fourth-axis", "warning",
      "llama.cpp's IMROPE reads the fourth axis e for pair" +
          std::string(pairs.size() == 1 ? " " : "s ") + list + ", where transformers reads t",
      "ggml_mrope_cache_init with sections [" + sections +
          ",0] sends a slot whose sector fails the h and w tests and is not a multiple of 3 to e; "
          "llama.cpp passes e = 0 for text and image tokens, so those pairs are not rotated at "
          "all. transformers' apply_interleaved_mrope gives them t. The angle they miss is up to " +
          sci(unrotated_angle(f, pairs, 4095), 2) + " rad at position 4095 and " +
          sci(unrotated_angle(f, pairs, ext - 1), 2) + " rad at position " +
          std::to_string(ext - 1) +
          " (the pair assignment as probed on ggml's CPU backend at d99724f2).",
      "Expect llama.cpp to differ from transformers in these pairs at long positions; pass e = t "
      "for text tokens if you build the positions yourself."));
}

}  // namespace

int ggml_imrope_axis(const AxisMap& map, std::int64_t pair) {
  std::int64_t s[4] = {0, 0, 0, 0};
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < map.sections.size() && i < 4; ++i) {
    s[i] = map.sections[i];
    sum += s[i];
  }
  if (sum <= 0) return 0;
  const std::int64_t sector = pair % sum;
  if (sector % 3 == 1 && sector < 3 * s[1]) return 1;
  if (sector % 3 == 2 && sector < 3 * s[2]) return 2;
  if (sector % 3 == 0 && sector < 3 * s[0]) return 0;
  return 3;
}

void add_findings(const ModelConfig& config, const DoctorOptions& options, const Comparison& cmp,
                  std::vector<Finding>& out) {
  const std::optional<MropeVision> vision = vision_of(config.model_type, options);
  if (axis_count(config.spec) <= 1 && !vision) return;
  const bool given = !options.layout.empty();
  const std::vector<MropeSegment> layout =
      given ? options.layout : parse_mrope_layout(kDoctorMropeLayout);
  bf16_cache_finding(config, out);
  position_rule_finding(vision, layout, given, out);
  fractional_seconds_finding(vision, layout, given, out);
  yarn_finding(config, cmp, out);
  imrope_finding(config, out);
}

void add_engine_notes(const RopeSpec& spec, std::string_view model_type, EngineView& view) {
  if (axis_count(spec) <= 1 || view.freqs.inv_freq.empty()) return;
  const bool yarn = method_reads(spec, kParamYarn);
  // The position rule each engine follows, with where the two first differ on doctor's
  // representative layout (transformers' defaults for the model_type's vision settings).
  if (const std::optional<MropeVision> vision = vision_of(model_type, {});
      vision && view.engine != Engine::kPrecise) {
    const std::vector<MropeSegment> layout = parse_mrope_layout(kDoctorMropeLayout);
    const std::optional<std::int64_t> first =
        mrope_first_difference(mrope_positions(layout, *vision, MropeRule::kHf45),
                               mrope_positions(layout, *vision, MropeRule::kHf53));
    const std::string where = first ? "the two first differ at token " + std::to_string(*first) +
                                          " of " + std::string(kDoctorMropeLayout)
                                    : "the two agree on " + std::string(kDoctorMropeLayout);
    view.notes.push_back(
        std::string("M-RoPE positions: ") +
        (view.engine == Engine::kTransformers
             ? "transformers v5 uses the hf-5.3 rule (text after a vision block at its start + "
               "max(H', W')), 4.x the hf-4.5 rule"
             : "the hf-4.5 rule (text after a vision block at its largest id + 1), as "
               "transformers 4.x") +
        "; " + where + " (posenc doctor --layout)");
  }
  if (view.engine == Engine::kVllm) {
    view.notes.push_back(
        "M-RoPE: MRotaryEmbedding casts its cos/sin cache to the query dtype, so under a bf16 "
        "model " +
        bf16_cache_numbers(spec));
    if (yarn) {
      view.notes.push_back(
          "M-RoPE with YaRN runs in MRotaryEmbedding since PR #25384; older vLLM ran this model's "
          "M-RoPE path without the scaling");
    }
  }
  if (view.engine == Engine::kLlamaCpp) {
    const std::vector<std::int64_t> pairs = imrope_e_pairs(spec);
    if (!pairs.empty()) {
      std::string list;
      for (const std::int64_t j : pairs) list += (list.empty() ? "" : ", ") + std::to_string(j);
      const std::int64_t at = extended_context(spec) - 1;
      const Frequencies f = compute_frequencies(spec, Numerics::kPrecise, at + 1);
      view.notes.push_back("IMROPE reads the fourth axis e for pairs " + list +
                           " (transformers: t); e = 0 for text, so they miss up to " +
                           sci(unrotated_angle(f, pairs, at), 2) + " rad at position " +
                           std::to_string(at));
    }
    if (yarn) {
      view.notes.push_back(
          "M-RoPE with YaRN: ggml_rope_multi passes every axis through rope_yarn (the attention "
          "factor and freq_factors compose)");
    }
  }
}

}  // namespace posenc::mrope_doctor
