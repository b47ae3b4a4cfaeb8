// posenc/analysis/engines.h: one model's RoPE as each inference engine computes it, side by side.
//
// The same config.json gives different numbers in Hugging Face transformers, llama.cpp and vLLM:
// keys that one engine drops (attention_factor, mscale, truncate), attention-factor rules that
// differ, frequencies built in float32 by different recipes. An EngineView is what one engine
// computes for a RopeSpec, in that engine's own arithmetic; compare_engines() lines the views up
// against the float64 formulas (Engine::kPrecise) and says, per engine, whether the difference
// is float32 rounding or something a user would notice. The facts behind each engine, with the
// source file and function of each, are in docs/engines.md.
//
//   engine        frequencies                                   attention factor / softmax
//   transformers  compute_frequencies(spec, kHf, seq_len)       as the spec asks (design.md §3)
//   llama.cpp     the GGUF convert_hf_to_gguf.py would write,   llama_context's yarn_attn_factor,
//                 run through ggml_rope_ext (kGgml numerics)    DeepSeek2's kq_scale
//   vllm          get_rope()'s class for the rope_type, in      that class's mscale; DeepSeek's
//                 float32 like transformers (kHf numerics)      softmax scale
//   precise       compute_frequencies(spec, kPrecise, seq_len)  as the spec asks
//
// Versions modelled: transformers 4.5x/5 (modeling_rope_utils.py with `truncate`), llama.cpp after
// PR 17945/18006 (December 2025: host-side YaRN attention factor for every architecture), vLLM
// 0.11.1 to 0.25 (plain YaRN honours `truncate` since PR 28244 but drops `attention_factor`,
// `mscale` and `mscale_all_dim`). docs/engines.md lists the later changes.
//
// Example (gpt-oss-20b: yarn x32, truncate false):
//   auto c = posenc::compare_engines(config.spec, 0, {}, config.model_type);
//   c.at(posenc::Engine::kLlamaCpp).verdict_text  // "differs in 9 pairs by up to 7.6e-01 ..."
//   c.at(posenc::Engine::kVllm).verdict           // Verdict::kAgrees
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/frequencies.h"
#include "posenc/core/spec.h"

namespace posenc {

enum class Engine { kTransformers, kLlamaCpp, kVllm, kPrecise };

// Every engine, in the order commands print them.
inline constexpr std::array<Engine, 4> kEngines = {Engine::kTransformers, Engine::kLlamaCpp,
                                                   Engine::kVllm, Engine::kPrecise};

std::string_view engine_name(Engine engine);  // "transformers", "llama.cpp", "vllm", "precise"

struct EngineView {
  Engine engine = Engine::kPrecise;
  // The frequencies as that engine computes them, in its arithmetic (kHf for transformers and
  // vLLM, kGgml for llama.cpp, kPrecise for precise). Empty when the engine has no way to run the
  // method at all (see `supported`).
  Frequencies freqs;
  double attention_factor = 1.0;          // what multiplies that engine's cos and sin
  double softmax_scale_multiplier = 1.0;  // what multiplies its softmax scale (DeepSeek)
  // What the engine does differently from the config as transformers reads it, one sentence
  // each: "drops mscale_all_dim", "ignores truncate: false (...)".
  std::vector<std::string> notes;
  // false: the engine refuses this method, or runs something else under its name; `freqs` then
  // holds what it would run when that is known.
  bool supported = true;
  std::string unsupported_reason;
};

// What `engine` computes for `spec` at sequence length `seq_len` (0: at initialisation; for
// llama.cpp also the context size n_ctx, which picks LongRoPE's factors). `model_type` is the
// config's model_type ("deepseek_v3", ...): llama.cpp and vLLM treat DeepSeek V2/V3 (and Kimi K2)
// YaRN with their own rules. Empty: DeepSeek is assumed when the spec sets mscale_all_dim.
// Validates `spec` (throws Error as validate() does).
EngineView engine_view(const RopeSpec& spec, Engine engine, std::int64_t seq_len = 0,
                       std::string_view model_type = {});

// The default positions to compare cos/sin at: L - 1, L, 4L and the extended context - 1, with
// L = original_max_position_embeddings, else max_position_embeddings, else 4096; capped at
// 2^31 - 1 (ggml's int32 positions), sorted, without duplicates.
std::vector<std::int64_t> default_comparison_positions(const RopeSpec& spec);

// How much relative inv_freq difference from float64 float32 arithmetic alone explains for pair i
// of `view` (u = 2^-24, e = 2i/D, b the base in effect, s = max(1, factor)):
//   transformers, vllm: u (e (ln b + 1) + 8 + 2s)   exponent and base rounded to float32 and
//                       amplified by ln b in b^e; pow, reciprocal, scale and blend roundings (8);
//                       a rounding error of the ramp or Llama 3 blend weight moves the blended
//                       frequency by up to (s - 1) u of its value, twice
//   llama.cpp:          u (e ln b + 2i + 8 + 2s)        theta_scale = powf(b, -2/D) carries its
//                       rounding into every step of the running product, which adds one more
//   precise:            0
double rounding_budget(const EngineView& view, const RopeSpec& spec, std::int64_t pair);

// Two attention factors (or softmax multipliers) count as equal within this relative tolerance:
// float32 evaluation of g(s, m) = 0.1 m ln s + 1 is good to a few 1e-8.
inline constexpr double kScalarTolerance = 1e-6;

enum class Verdict {
  kAgrees,       // inv_freq within the rounding budget, same attention factor and softmax scale
  kDiffers,      // frequencies or scalars differ beyond float32 rounding
  kUnsupported,  // the engine cannot run this method as the model asks
};

std::string_view verdict_name(Verdict verdict);  // "agrees", "differs", "unsupported"

struct EngineComparison {
  EngineView view;
  std::vector<double> relative_difference;  // per pair: |w - w_precise| / w_precise
  std::vector<double> budget;               // per pair: rounding_budget()
  double max_relative_difference = 0.0;
  std::int64_t pairs_differing = 0;             // pairs beyond their budget
  double max_relative_difference_beyond = 0.0;  // largest difference among those pairs
  bool attention_factor_differs = false;
  bool softmax_scale_differs = false;
  // Per position of Comparison::positions: the largest |cos - cos_precise| and |sin - sin_precise|
  // over pairs, attention factors included.
  std::vector<double> cos_sin_difference;
  Verdict verdict = Verdict::kAgrees;
  // One line: "agrees (float32 rounding only: inv_freq within 3.1e-07)", "differs in 9 pairs by
  // up to 7.6e-01 (inv_freq, relative)", "uses a different attention factor (1.3689 vs 1)",
  // "not supported: ...". Reasons are joined with "; ".
  std::string verdict_text;
};

struct Comparison {
  RopeSpec spec;
  std::string model_type;
  std::int64_t seq_len = 0;
  std::vector<std::int64_t> positions;
  std::vector<EngineComparison> engines;  // in kEngines order; precise is the reference

  const EngineComparison& at(Engine engine) const;
};

// Every engine's view of `spec`, each compared with kPrecise. `positions` empty: the defaults.
// Throws Error for a negative position or one that does not fit ggml's int32 positions, and as
// check_seq_len_covers() does.
Comparison compare_engines(const RopeSpec& spec, std::int64_t seq_len = 0,
                           std::span<const std::int64_t> positions = {},
                           std::string_view model_type = {});

// Throws Error when seq_len > 0 and some of `positions` is not below it (seq_len is the largest
// position + 1); the message names them `seq_len_name` and `positions_name` (the CLI's flags).
void check_seq_len_covers(std::int64_t seq_len, std::span<const std::int64_t> positions,
                          std::string_view seq_len_name = "seq_len",
                          std::string_view positions_name = "positions");

// The relative inv_freq difference of pair i between `freqs` and `reference` (0 when both are 0;
// infinity when only the reference is 0). Both must have the same pair count (else Error).
std::vector<double> relative_differences(const Frequencies& freqs, const Frequencies& reference);

// The largest |cos - cos_ref| and |sin - sin_ref| over pairs at `position` (attention factors
// included, each in its own numerics).
double max_cos_sin_difference(const Frequencies& freqs, const Frequencies& reference,
                              std::int64_t position);

}  // namespace posenc
