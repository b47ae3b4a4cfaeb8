// posenc/report/figures.h: the figures of `posenc plot` and `posenc report`, each returned as SVG
// text.
//
//   sinusoidal_figure   PE(p, j) of "Attention Is All You Need" as a heatmap, positions x dims
//                       (the seed document's "128维50输入" = 50 x 128 and "150维200输入" = 200 x 150)
//   similarity_figure   PE(p) . PE(q) for every pair of positions: a function of p - q only
//   wavelength_figure   lambda_i = 2 pi / w_i per pair (log) for plain RoPE and each scaling method
//   yarn_ramp_figure    YaRN's interpolation weight: the implementations' ramp over the pair index
//                       and the paper's ramp over r = L / lambda, side by side
//   decay_figure        RoFormer §3.4.3's long-term decay bound vs relative distance, per method
//   attention_factor_figure
//                       attention factors vs the scale factor s: YaRN, DeepSeek, LongRoPE
//   perplexity_figure   `posenc eval`'s perplexity against context, one line per method
//   axis_map_figure     M-RoPE: which position axis (t, h, w) each frequency slot reads, a strip
//                       of slots coloured by axis beside each slot's wavelength
//   mrope_positions_figure
//                       M-RoPE: the t/h/w ids of an image inside a text against the token index
//
// figure_kinds() lists all but perplexity (the kinds `posenc plot` draws and the report shows);
// the two M-RoPE kinds only for a model with an axis map (FigureKind::applies).
//
// The RoPE figures compare methods in one Scenario taken from the model: its dims and base, its
// scale factor s (8 when the model has no scaling), its original context L and the extended
// context s L. Every title starts with the stable prefix given below, so that tests and readers
// can find a figure.
//
// Example:
//   posenc::RopeSpec spec = ...;  // Llama 2 7B, yarn, s = 16, L = 4096
//   std::ofstream("wavelengths.svg") << posenc::figures::wavelength_figure(spec, "Llama 2 7B");
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/frequencies.h"
#include "posenc/core/sinusoidal.h"
#include "posenc/core/spec.h"

namespace posenc::figures {

inline constexpr std::string_view kSinusoidalTitle = "Sinusoidal positional encoding";
inline constexpr std::string_view kSimilarityTitle = "Similarity of sinusoidal encodings";
inline constexpr std::string_view kWavelengthTitle = "Wavelength per rotated pair";
inline constexpr std::string_view kYarnRampTitle = "YaRN interpolation weight";
inline constexpr std::string_view kDecayTitle = "RoPE long-term decay";
inline constexpr std::string_view kAttentionFactorTitle = "Attention factor vs scale factor";
inline constexpr std::string_view kAxisMapTitle = "M-RoPE axis map";
inline constexpr std::string_view kMropePositionsTitle = "M-RoPE positions of an image in text";

// The prompt mrope_positions_figure draws: 6 text tokens, a 12 x 16 patch image, 6 text tokens.
inline constexpr std::string_view kFigureMropeLayout = "text:6,image:1x12x16,text:6";

// The scale factor the RoPE figures use for a model without scaling (Llama 3.1's factor).
inline constexpr double kDefaultFigureFactor = 8.0;

// Limits on the figures' sizes and work (Release build, one core).
// A heatmap has at most kMaxFigureCells cells: about 11 bytes of SVG a cell, so 11 MB.
inline constexpr std::int64_t kMaxFigurePositions = 4096;
inline constexpr std::int64_t kMaxFigureCells = 1'000'000;
// similarity_figure draws positions x positions cells: sqrt(kMaxFigureCells). At 1000
// positions: 11 MB of SVG, 0.8 s (2.3 s at d_model 1000).
inline constexpr std::int64_t kMaxSimilarityPositions = 1000;
// decay_figure costs pairs x 4000 distances x 8 methods complex exponentials: 2048 pairs
// (head_dim 4096) take 2.2 s, 4096 pairs 4.3 s, the 32768 of head_dim 65536 about 20 s (Release,
// one core). Real models rotate at most 256 pairs.
inline constexpr std::int64_t kMaxDecayPairs = 2048;

struct Scenario {
  double factor = 1.0;                // s: the model's factor, or kDefaultFigureFactor
  std::int64_t original_context = 0;  // L: original_max_position_embeddings, else L', else 4096
  std::int64_t extended_context = 0;  // round(s L)
};

Scenario scenario_of(const RopeSpec& model);

// One method applied to the model's dims and base in the scenario.
struct MethodVariant {
  std::string label;  // "yarn ×16", "dynamic NTK at 65536", ...
  RopeSpec spec;
  std::int64_t seq_len = 0;  // the sequence length the frequencies are computed at
  Frequencies frequencies;   // compute_frequencies(spec, kPrecise, seq_len)
  bool is_model = false;     // this is the model's own method (label ends in "(model)")
};

// Plain RoPE, linear, ntk, dynamic NTK at the extended context, yarn, yarn-paper and llama3,
// plus the model's own method when it is none of these (longrope, proportional, dynamic-yarn).
// The yarn and llama3 variants take the model's yarn / llama3 parameters when it has them.
std::vector<MethodVariant> method_variants(const RopeSpec& model);

// RoFormer §3.4.3 (eq. 37): the relative upper bound (1/n) sum_{j=1..n} |S_j| with
// S_j = sum_{k<j} exp(i delta w_k). Equal to (n + 1) / 2 at delta = 0.
double relative_upper_bound(std::span<const double> inv_freq, double delta);

// Throws Error naming the field when spec is invalid, positions is outside
// [1, kMaxFigurePositions], positions * d_model exceeds kMaxFigureCells or (similarity)
// positions exceeds kMaxSimilarityPositions.
std::string sinusoidal_figure(const SinusoidalSpec& spec, std::int64_t positions);
std::string similarity_figure(const SinusoidalSpec& spec, std::int64_t positions);

// `model_name` appears in the title ("" leaves it out). Throw Error when the spec is invalid,
// and decay_figure when the model has more than kMaxDecayPairs rotated pairs.
std::string wavelength_figure(const RopeSpec& model, std::string_view model_name = {});
std::string yarn_ramp_figure(const RopeSpec& model, std::string_view model_name = {});
std::string decay_figure(const RopeSpec& model, std::string_view model_name = {});
std::string attention_factor_figure(const RopeSpec& model, std::string_view model_name = {});
// Throw Error naming the figure when the spec is invalid or has one position axis.
std::string axis_map_figure(const RopeSpec& model, std::string_view model_name = {});
std::string mrope_positions_figure(const RopeSpec& model, std::string_view model_name = {});
// Whether the model has more than one position axis (the M-RoPE kinds' `applies`).
bool multi_axis_only(const RopeSpec& model);

// `posenc eval`'s results: the perplexity of one method at one context.
struct PerplexityPoint {
  std::string method;
  std::int64_t context = 0;
  double perplexity = 0;  // not finite: left out of the line
};

// Perplexity against context (log-log), one line per name in `methods` (yarn-paper and
// dynamic-yarn dashed), the x axis spanning `contexts`, a dashed line at `trained_context`.
// `caption` describes the protocol; the figure adds "Trained context N (dashed line).".
std::string perplexity_figure(std::string_view title, std::string_view caption,
                              std::span<const std::string> methods,
                              std::span<const std::int64_t> contexts,
                              std::span<const PerplexityPoint> points,
                              std::int64_t trained_context);

// One figure kind of `posenc plot`: a sinusoidal kind (drawn from a SinusoidalSpec and a number
// of positions) or a model kind (drawn from a model's RopeSpec).
struct FigureKind {
  std::string_view name;     // as `posenc plot` takes it: "sinusoidal", "wavelengths", ...
  std::string_view title;    // the stable title prefix (kSinusoidalTitle, ...)
  std::string_view heading;  // the report's heading
  std::string_view help;     // one line for `posenc plot --help`
  std::int64_t default_positions = 0;  // sinusoidal kinds: positions drawn by default
  std::string (*sinusoidal)(const SinusoidalSpec&, std::int64_t positions) = nullptr;  // or
  std::string (*model)(const RopeSpec&, std::string_view model_name) = nullptr;
  // Model kinds: whether the figure is drawn for this model (the report leaves it out when not,
  // `posenc plot` refuses it); nullptr: every model.
  bool (*applies)(const RopeSpec&) = nullptr;
  bool is_sinusoidal() const { return sinusoidal != nullptr; }
  bool applies_to(const RopeSpec& spec) const { return applies == nullptr || applies(spec); }
};

// Every kind, in the order `posenc plot --help` and the report show them.
std::span<const FigureKind> figure_kinds();

// The kind called `name`, or nullptr.
const FigureKind* find_figure_kind(std::string_view name);

}  // namespace posenc::figures
