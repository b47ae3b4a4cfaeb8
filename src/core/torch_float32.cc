// torch 1.13's float32 pow, cos and sin (torch_float32.h). What torch calls, and the experiments
// that established it, are in docs/numerics.md.
#include "core/torch_float32.h"

#include <sleef.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include "posenc/core/error.h"

// sleef.h declares the purecfma functions only where FP_FAST_FMA is defined (code built with
// -mfma); posenc is not, and calls them only after checking that the CPU has FMA.
extern "C" {
float Sleef_powf1_u10purecfma(float, float);
float Sleef_cosf1_u10purecfma(float);
float Sleef_sinf1_u10purecfma(float);
}

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>  // sleef.h declares Sleef_{cos,sin}f4_u10avx2128
#endif

namespace posenc {
namespace {

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) || defined(__i386__)
  static const bool kHas = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return kHas;
#else
  return false;
#endif
}

// at::native::compute_cpu_capability: the environment variable first (an unknown value is
// ignored, torch warns), then CPUID. torch 1.12+ never picks AVX512 by itself (pytorch #80253).
TorchCapability compute_torch_capability() {
  if (const char* env = std::getenv("ATEN_CPU_CAPABILITY")) {
    const std::string_view v(env);
    for (TorchCapability c :
         {TorchCapability::kDefault, TorchCapability::kAvx2, TorchCapability::kAvx512}) {
      if (v == torch_capability_name(c)) return c;
    }
  }
  return cpu_has_avx2_fma() ? TorchCapability::kAvx2 : TorchCapability::kDefault;
}

}  // namespace

TorchCapability torch_capability() {
  static const TorchCapability kCapability = compute_torch_capability();
  return kCapability;
}

std::string_view torch_capability_name(TorchCapability capability) {
  switch (capability) {
    case TorchCapability::kDefault:
      return "default";
    case TorchCapability::kAvx2:
      return "avx2";
    case TorchCapability::kAvx512:
      return "avx512";
  }
  return "?";
}

TorchCapability parse_torch_capability(std::string_view name, std::string_view field) {
  for (TorchCapability c :
       {TorchCapability::kDefault, TorchCapability::kAvx2, TorchCapability::kAvx512}) {
    if (name == torch_capability_name(c)) return c;
  }
  throw Error(std::string(field) + " (\"" + std::string(name) +
              "\") must be one of default, avx2, avx512");
}

}  // namespace posenc

namespace posenc::detail {
namespace {

// Sleef's purecfma kernels are built with FMA instructions: without them they would fault, as
// torch's own AVX2/AVX512 kernels would on that CPU.
bool uses_sleef(TorchCapability capability) {
  if (capability == TorchCapability::kDefault) return false;
  if (!cpu_has_avx2_fma()) {
    throw Error("ATEN_CPU_CAPABILITY (" + std::string(torch_capability_name(capability)) +
                ") selects torch's " + std::string(torch_capability_name(capability)) +
                " kernels, which need a CPU with AVX2 and FMA; this CPU has none, so hf "
                "numerics cannot reproduce them (use ATEN_CPU_CAPABILITY=default)");
  }
  return true;
}

}  // namespace

std::size_t torch_pow_body_width(TorchCapability capability) {
  switch (capability) {
    case TorchCapability::kDefault:
      return 0;
    case TorchCapability::kAvx2:
      return 16;
    case TorchCapability::kAvx512:
      return 32;
  }
  return 0;
}

std::vector<float> torch_pow(float base, std::span<const float> exponents,
                             TorchCapability capability) {
  const std::size_t n = exponents.size();
  const std::size_t w = torch_pow_body_width(capability);
  // ATen's vectorized_loop: whole 2-vector blocks through Vectorized::pow (Sleef), the rest
  // through basic_loop's scalar std::pow(float, float) = powf.
  const std::size_t body = uses_sleef(capability) ? w * (n / w) : 0;
  std::vector<float> p(n);
  for (std::size_t i = 0; i < n; ++i) {
    p[i] = i < body ? Sleef_powf1_u10purecfma(base, exponents[i]) : ::powf(base, exponents[i]);
  }
  return p;
}

// vec::map has no scalar tail (a partial vector goes through the same kernel): every element.
float torch_cos(float x, TorchCapability capability) {
  return uses_sleef(capability) ? Sleef_cosf1_u10purecfma(x) : ::cosf(x);
}

float torch_sin(float x, TorchCapability capability) {
  return uses_sleef(capability) ? Sleef_sinf1_u10purecfma(x) : ::sinf(x);
}

namespace {

// Sleef's u10 cosf/sinf take the Cody-Waite path for a vector only if every lane has
// |x| < TRIGRANGEMAX2f = 125 (checked against Sleef_cosf8_u10avx2), else Payne-Hanek (rempif)
// for every lane.
constexpr float kTrigRangeMax2 = 125.0f;

bool fast_lane(float x) { return std::fabs(x) < kTrigRangeMax2; }

// The lanes of one of vec::map's vectors with Sleef (capability not DEFAULT).
std::size_t sleef_lanes(TorchCapability capability) {
  return capability == TorchCapability::kAvx512 ? 16 : 8;
}

#if defined(__x86_64__) || defined(__i386__)
// cos and sin of 4 lanes by Sleef's 4-lane FMA kernels, which take the Cody-Waite path when all 4
// are fast lanes and Payne-Hanek for all 4 otherwise, as the 8- and 16-lane kernels torch calls
// do for theirs: on each lane the bits of the scalar purecfma kernel on the same path (checked on
// every finite float of either sign, on both paths, against Sleef_{cos,sin}f1_u10purecfma and the
// 8-lane Sleef_{cos,sin}f8_u10avx2: bench/sleef_lanes_check, no difference), at a quarter of the
// calls. transformers' rows computed per token (hf numerics without a table) took 6.1 us a token
// for 64 pairs one lane at a time, 1.1 us four at a time and only the row's half (Zen 4).
void cos_sin_4(const float* x, float* c, float* s) {
  const __m128 v = _mm_loadu_ps(x);
  _mm_storeu_ps(c, Sleef_cosf4_u10avx2128(v));
  _mm_storeu_ps(s, Sleef_sinf4_u10avx2128(v));
}
constexpr bool kCosSin4 = true;

// The Payne-Hanek result for a small x: lane 0 of a vector whose other lanes force that path.
// Sleef's 4-lane FMA kernel (AVX2 instructions on SSE registers) gives the 8-lane one's bits
// (checked on 1,466,115 x in [2^-10, 125)) and keeps AVX types out of the signature, which
// clang refuses in code not compiled for AVX.
void slow_cos_sin(float x, float& c, float& s) {
  const __m128 v = _mm_setr_ps(x, kTrigRangeMax2, kTrigRangeMax2, kTrigRangeMax2);
  c = _mm_cvtss_f32(Sleef_cosf4_u10avx2128(v));
  s = _mm_cvtss_f32(Sleef_sinf4_u10avx2128(v));
}
#else
void cos_sin_4(const float*, float*, float*) {}
constexpr bool kCosSin4 = false;
void slow_cos_sin(float, float&, float&) {
  throw Error("torch's Sleef cos/sin are only reproduced on x86-64");
}
#endif

}  // namespace

void torch_cos_sin_flat(std::span<const float> x, std::span<float> cos_out,
                        std::span<float> sin_out, TorchCapability capability) {
  const std::size_t n = x.size();
  if (!uses_sleef(capability)) {
    for (std::size_t i = 0; i < n; ++i) {
      cos_out[i] = ::cosf(x[i]);
      sin_out[i] = ::sinf(x[i]);
    }
    return;
  }
  // vec::map: groups of `lanes` from the start of the buffer; a partial last group is
  // zero-padded (zeros are fast lanes).
  const std::size_t lanes = sleef_lanes(capability);
  for (std::size_t lo = 0; lo < n; lo += lanes) {
    const std::size_t hi = std::min(lo + lanes, n);
    bool fast = true;
    for (std::size_t j = lo; j < hi; ++j) fast = fast && fast_lane(x[j]);
    std::size_t i = lo;
    if (kCosSin4) {
      // Whole quarters of the group by the 4-lane kernel, which takes the group's path for them
      // where the group is all fast or the quarter has a slow lane; a fast quarter of a slow group
      // needs Payne-Hanek forced, lane by lane.
      for (; i + 4 <= hi; i += 4) {
        const bool quarter_fast =
            fast_lane(x[i]) && fast_lane(x[i + 1]) && fast_lane(x[i + 2]) && fast_lane(x[i + 3]);
        if (fast || !quarter_fast) {
          cos_sin_4(&x[i], &cos_out[i], &sin_out[i]);
        } else {
          for (std::size_t j = i; j < i + 4; ++j) slow_cos_sin(x[j], cos_out[j], sin_out[j]);
        }
      }
    }
    for (; i < hi; ++i) {
      if (fast || !fast_lane(x[i])) {
        cos_out[i] = Sleef_cosf1_u10purecfma(x[i]);
        sin_out[i] = Sleef_sinf1_u10purecfma(x[i]);
      } else {
        slow_cos_sin(x[i], cos_out[i], sin_out[i]);
      }
    }
  }
}

void torch_cos_sin_row(std::span<const float> angles, std::span<float> cos_out,
                       std::span<float> sin_out, TorchCapability capability) {
  // emb = [angles, angles] through the flat rule; the first half is the row's answer.
  const std::size_t n = angles.size();
  constexpr std::size_t kStack = 512;
  float emb_stack[2 * kStack], c_stack[2 * kStack], s_stack[2 * kStack];
  std::vector<float> heap;
  float *emb = emb_stack, *c = c_stack, *s = s_stack;
  if (n > kStack) {
    heap.resize(6 * n);
    emb = heap.data();
    c = emb + 2 * n;
    s = c + 2 * n;
  }
  std::copy(angles.begin(), angles.end(), emb);
  std::copy(angles.begin(), angles.end(), emb + n);
  // Only the lane groups that hold slots 0..n-1: groups start at multiples of the lanes, so the
  // flat rule over that prefix of emb makes the same choice for each of them as over all of it.
  const std::size_t lanes = uses_sleef(capability) ? sleef_lanes(capability) : 1;
  const std::size_t prefix = std::min(2 * n, (n + lanes - 1) / lanes * lanes);
  torch_cos_sin_flat({emb, prefix}, {c, prefix}, {s, prefix}, capability);
  std::copy(c, c + n, cos_out.begin());
  std::copy(s, s + n, sin_out.begin());
}

}  // namespace posenc::detail
