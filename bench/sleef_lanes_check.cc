// bench/sleef_lanes_check.cc: are Sleef's scalar FMA kernels (Sleef_{cos,sin}f1_u10purecfma),
// its 4-lane ones (..f4_u10avx2128) and the 8-lane ones torch calls (..f8_u10avx2) the same bits
// on every float32? hf numerics (src/core/torch_float32.cc) compute torch's vectors four lanes
// at a time and rely on it. Every float of either sign in vectors of 8 consecutive ones: below
// 125 in magnitude all lanes of a vector take Sleef's Cody-Waite path, from 125 up (infinities
// and NaNs left out) all take Payne-Hanek, so each path is compared whole. About 4.3e9 floats,
// 10-15 minutes on one core (Zen 4). Prints the first differences and their count; exits 1 if
// any. A documented check (docs/numerics.md), not a test. Usage: sleef_lanes_check
#include <immintrin.h>
#include <sleef.h>  // built with -mavx2 -mfma, it declares the purecfma and AVX2 kernels

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <initializer_list>

int main() {
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) {
    std::fprintf(stderr,
                 "sleef_lanes_check: this CPU has no AVX2 and FMA (Sleef's kernels need them)\n");
    return 2;
  }
  std::uint64_t differ = 0, checked = 0;
  const std::uint32_t limit = 0x7F800000u;  // +infinity: every finite magnitude below it
  for (std::uint32_t sign : {0u, 0x80000000u}) {
    for (std::uint32_t b = 0; b < limit; b += 8) {
      float x[8];
      for (std::uint32_t j = 0; j < 8; ++j) {
        const std::uint32_t u = (b + j) | sign;
        std::memcpy(&x[j], &u, 4);
      }
      // A vector straddling 125 mixes the paths; the 8 lanes from 0x42FA0000 (125) start one.
      float c8[8], s8[8], c4[8], s4[8];
      const __m256 v = _mm256_loadu_ps(x);
      _mm256_storeu_ps(c8, Sleef_cosf8_u10avx2(v));
      _mm256_storeu_ps(s8, Sleef_sinf8_u10avx2(v));
      for (int h = 0; h < 2; ++h) {
        const __m128 w = _mm_loadu_ps(x + 4 * h);
        _mm_storeu_ps(c4 + 4 * h, Sleef_cosf4_u10avx2128(w));
        _mm_storeu_ps(s4 + 4 * h, Sleef_sinf4_u10avx2128(w));
      }
      for (int j = 0; j < 8; ++j) {
        const float c1 = Sleef_cosf1_u10purecfma(x[j]), s1 = Sleef_sinf1_u10purecfma(x[j]);
        if (std::memcmp(&c1, &c8[j], 4) != 0 || std::memcmp(&s1, &s8[j], 4) != 0 ||
            std::memcmp(&c1, &c4[j], 4) != 0 || std::memcmp(&s1, &s4[j], 4) != 0) {
          if (differ < 10)
            std::printf("x = %a: scalar %a %a, 4 lanes %a %a, 8 lanes %a %a\n", x[j], c1, s1, c4[j],
                        s4[j], c8[j], s8[j]);
          ++differ;
        }
        ++checked;
      }
    }
  }
  std::printf("sleef_lanes_check: %llu of %llu floats differ\n",
              static_cast<unsigned long long>(differ), static_cast<unsigned long long>(checked));
  return differ == 0 ? 0 : 1;
}
