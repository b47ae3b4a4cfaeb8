// posenc/core/ggml.h: the parameters of llama.cpp's ggml_rope_ext, and how a RopeSpec maps to them.
//
// ggml_rope_ext(ctx, a, pos, freq_factors, n_dims, mode, n_ctx_orig, freq_base, freq_scale,
//               ext_factor, attn_factor, beta_fast, beta_slow)
// computes, per pair i in [0, n_dims/2) and position p (all float32):
//   theta_scale = powf(freq_base, -2 / n_dims)
//   theta_i     = p * theta_scale^i            (a running product: theta_{i+1} = theta_i * scale)
//   extrap      = theta_i / freq_factors[i]     (1 without freq_factors)
//   interp      = freq_scale * extrap
//   corr dims   = floor/ceil(n_dims ln(n_ctx_orig / (2 pi beta)) / (2 ln freq_base)), clamped
//   ramp        = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1); mix = ramp * ext_factor
//   theta       = ext_factor != 0 ? interp (1 - mix) + extrap mix : interp
//   mscale      = attn_factor * (ext_factor != 0 ? 1 + 0.1 ln(1 / freq_scale) : 1)
//   cos, sin    = cosf(theta) * mscale, sinf(theta) * mscale
//
// ggml_rope_multi (modes MROPE, IMROPE, VISION) takes positions [4, tokens] (t, h, w, e) and
// sections[4]; pair i reads sector = i % sum(sections) (ggml_mrope_cache_init):
//   MROPE   sector < s0 -> t, < s0+s1 -> h, < s0+s1+s2 -> w, else e (NeoX pairs (i, i + n/2))
//   IMROPE  sector%3==1 && sector < 3 s1 -> h; %3==2 && < 3 s2 -> w; %3==0 && < 3 s0 -> t;
//           else e (NeoX pairs)
//   VISION  as MROPE, but each axis' theta restarts at its section start (if/else-if on
//           sector == 0, s0, s0+s1, s0+s1+s2, so an empty section blocks the next restart);
//           n_dims == head_dim / 2 pairs (i, i + n_dims) over the whole head
// Every axis keeps its own running product theta_a *= theta_scale at every pair; the YaRN ramp
// and freq_factors use the global pair index i.
#pragma once

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "posenc/core/spec.h"

namespace posenc {

struct Frequencies;

// ggml's mode bits: 0 rotates pairs (2i, 2i+1), GGML_ROPE_TYPE_NEOX (2) pairs (i, i + n/2);
// GGML_ROPE_TYPE_MROPE (8), VISION (24) and IMROPE (40) are ggml_rope_multi's (mode & 8).
enum class GgmlMode { kNormal = 0, kNeox = 2, kMrope = 8, kVision = 24, kImrope = 40 };

// True for the ggml_rope_multi modes (MROPE, VISION, IMROPE): positions [4, tokens].
constexpr bool ggml_is_multi(GgmlMode mode) { return (static_cast<int>(mode) & 8) != 0; }
// "normal", "neox", "mrope", "vision", "imrope".
std::string_view ggml_mode_name(GgmlMode mode);
// A mode by name or by ggml's number ("neox" or "2"); throws Error naming `field` otherwise.
GgmlMode parse_ggml_mode(std::string_view name, std::string_view field = "mode");

struct GgmlRopeParams {
  int n_dims = 0;  // rotated dims D (even)
  GgmlMode mode = GgmlMode::kNormal;
  int n_ctx_orig = 0;  // L; ggml_rope() passes 0
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;  // 1 / s
  float ext_factor = 0.0f;
  float attn_factor = 1.0f;
  float beta_fast = 32.0f;  // ggml_rope() passes 0 (unused while ext_factor is 0)
  float beta_slow = 1.0f;
  std::vector<float> freq_factors;  // empty, or one divisor per pair (rope_freqs, LongRoPE)
  // ggml_rope_multi's sections (t, h, w, e) for the multi modes; all 0 for NORMAL and NEOX.
  std::array<int, 4> sections{};
};

// Pairs a call rotates: n_dims / 2, or n_dims for VISION (pairs (i, i + n_dims)).
int ggml_pair_count(const GgmlRopeParams& params);

// Which position axis (0..3: t, h, w, e) each pair of a multi mode reads, as an AxisMap of rule
// kGgml over 4 axes; the one-axis map for NORMAL and NEOX.
AxisMap ggml_axis_map(const GgmlRopeParams& params);

// The checks ggml_rope_multi makes against the tensor (ne0 = head_dim): n_dims <= head_dim,
// VISION's n_dims == head_dim / 2, and sum(sections) <= head_dim. Throws Error naming them.
void validate_head_dim(const GgmlRopeParams& params, std::int64_t head_dim);

// Throws Error naming the parameter when n_dims is not positive and even, freq_base is not a
// finite number above 1, freq_scale is not a finite normal float above 0, attn_factor is not
// above 0, n_ctx_orig is negative, freq_factors has the wrong length or a value that is not
// positive, or ext_factor != 0 without a usable n_ctx_orig and beta_fast > beta_slow > 0 (the
// classes validate(const RopeSpec&) refuses); and for the multi modes a negative section or
// s0 = s1 = s2 = 0 (ggml asserts one is positive), for NORMAL and NEOX any section not 0. Returns warnings for legal but odd values
// (freq_scale above 1, ext_factor outside [0, 1], an inverted correction range).
std::vector<std::string> validate(const GgmlRopeParams& params);

// The ggml_rope_ext parameters that compute `spec` at sequence length `seq_len` (0: none) with
// llama.cpp's arithmetic: freq_scale = 1/s for linear and yarn; freq_base = the NTK base for ntk
// and dynamic; rope_freqs computed as convert_hf_to_gguf.py does for llama3; the short or long
// factors for longrope; 1/0 factors (+inf) for proportional's unrotated pairs; and for yarn an
// attn_factor divided by 1 + 0.1 ln(s) as llama-context.cpp does (PR 17945), which ggml
// multiplies back (only while ext_factor != 0), so that cos and sin carry the spec's attention
// factor; spec.freq_factors (rope_freqs) become freq_factors. This honours every key of the spec
// except yarn's truncate false, which ggml cannot express (it always floors and ceils the
// correction range); what llama.cpp itself does with a model (keys its converter drops, truncate
// ignored, its own attention-factor rule) is engines.h's Engine::kLlamaCpp.
GgmlRopeParams ggml_params_from_spec(const RopeSpec& spec, std::int64_t seq_len = 0);

// Frequencies in kGgml numerics for a ggml_rope_ext / ggml_rope_multi call. inv_freq[i] is the
// angle ggml computes at position 1 (every axis at 1); cos_sin_at reproduces the running product
// at any position. A multi mode's spec carries ggml_axis_map (4 axes; positions [4, tokens]) and,
// for VISION, rotary_dim = head_dim = 2 n_dims in half-split layout.
Frequencies frequencies_from_ggml(const GgmlRopeParams& params);

}  // namespace posenc
