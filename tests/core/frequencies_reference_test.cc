// tests/core/frequencies_reference_test.cc: posenc::compute_frequencies against the independent
// references in tests/reference/, entry by entry, over a grid of real model shapes
// (reference/spec_grid.h): every method, head dims 64..256, full and partial rotary dims,
// bases 1e4..1e6, factors 1..40, sequence lengths 0, L, 2L, 10L, and the YaRN options.
//
// Tolerances:
// - kPrecise inv_freq: (16 + 2 |ln w|) * 2^-53 relative. An implementation that evaluates
//   b^(-2i/D) as pow(b, fl(-2i/D)) or exp(fl(-2i/D) * ln b) carries the rounding of the
//   exponent into the result, amplified by |ln w| (2^-53 per rounding of x = -2i/D and of
//   x ln b, so 2 |ln w| 2^-53 at most); pow itself, the division by s, a blend of two terms or
//   the rounding of an NTK/dynamic base (whose exponent 2i/D < 1 damps it) add a handful of
//   ulps: 16 * 2^-53 = 8 ulps covers them. The reference is correctly rounded (see
//   rope_reference.h). At |ln w| = 14 (w = 1e-6) the bound is 4.9e-15; a formula error of
//   any kind (wrong exponent, wrong ramp, wrong base) is many orders above it.
//   Pairs inside a blend band (0 < weight < 1) add the blend's conditioning: w' = w/s +
//   w (1 - 1/s) gamma moves by w (1 - 1/s) dgamma, and dgamma is not small relative to w'
//   when w' is near w/s. For llama3, gamma = (L/lambda - lf) / (hf - lf) cancels near the
//   low-frequency edge (L/lambda -> lf), so dgamma = (L/lambda) e_r / (hf - lf), with e_r the
//   relative error of L/lambda (that of w plus 3 roundings); the paper's YaRN ramp likewise
//   with r / (beta_fast - beta_slow); the index ramp (i - lo) / (hi - lo) has dgamma <= 4 ulps.
//   (Found necessary: Llama 3 at head_dim 96, b 5e5, s 40, pair 26 has L/lambda = 1.067, an
//   amplification of 16, and a correct double implementation is 19 ulps from the exact
//   value there.)
// - kPrecise scalars: attention factor and softmax multiplier 2e-15 relative (a log, a
//   product and a division, each half an ulp, in g(s,m) / g(s,m')); NTK/dynamic base 4e-15
//   relative (pow of the argument with exponent D/(D-2) rounded: |ln base| 2^-53 <= 20 *
//   1.1e-16 is below it with the multiplication by b); YaRN correction dims exact when
//   truncated (integers), 1e-12 absolute otherwise (a log and a division near 1..64).
// - interpolation weights: 1e-14 absolute for blend weights (the same double ramp formula,
//   a couple of roundings); 1e-13 absolute for log-based weights (ntk, longrope), since
//   ln(unscaled / w) inherits the relative error of w (< 5e-15) divided by ln s >= ln 2.
// - kHf: bit for bit. Both posenc and the emulation round every float32 operation once and
//   call torch's own pow (Sleef or libm by index), so a mismatch is a bug, never noise.
// - kGgml (frequencies_from_ggml + cos_sin_at): bit for bit against the llama.cpp emulation,
//   which calls the C library's powf/logf/cosf/sinf as ggml does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/ggml.h"
#include "posenc/core/spec.h"
#include "reference/ggml_reference.h"
#include "reference/hf_float32_reference.h"
#include "reference/rope_reference.h"
#include "support/spec_adapters.h"
#include "support/spec_grid.h"

namespace {

using posenc_test::Describe;
using posenc_test::GridCase;
using posenc_test::UlpDistance;

constexpr double kEps53 = 0x1p-53;

// Counts mismatches and reports the first few in full (a grid this size would otherwise bury
// the first useful message under thousands of lines).
class Mismatches {
 public:
  explicit Mismatches(int limit = 25) : limit_(limit) {}
  void Add(const std::string& message) {
    if (count_ < limit_) ADD_FAILURE() << message;
    ++count_;
  }
  int count() const { return count_; }

 private:
  int limit_;
  int count_ = 0;
};

std::string Num(double x) {
  std::ostringstream os;
  os.precision(17);
  os << x;
  return os.str();
}

// The kPrecise frequency tolerance derived in the header comment.
double PreciseTolerance(double want) {
  if (want == 0.0) return 0.0;
  return (16.0 + 2.0 * std::fabs(std::log(std::fabs(want)))) * kEps53 * std::fabs(want);
}

// The blend-conditioning term of the header comment: the absolute error that a correct
// implementation, working with unit roundoff `eps`, may add to pair i of a blend method
// through its blend weight. `weight` is the reference's interpolation weight (NaN: none).
// `lo` and `hi` are the ramp bounds (the index ramp's origin rounds by lo * eps in float32).
double BlendTolerance(const posenc::RopeSpec& spec, double scale, std::size_t i, double w,
                      double weight, double eps, double lo, double hi) {
  if (std::isnan(weight) || weight <= 0.0 || weight >= 1.0 || scale <= 1.0) return 0.0;
  const double spread = w * (1.0 - 1.0 / scale);  // d w' / d gamma
  const double e_r = (2.0 * std::fabs(std::log(w)) + 16.0) * eps;
  double dgamma = 0.0;
  switch (spec.method) {
    case posenc::Method::kLlama3: {
      const double ratio =
          static_cast<double>(spec.original_max_position_embeddings) * w / (2.0 * posenc_ref::kPi);
      dgamma = ratio * e_r / (spec.llama3.high_freq_factor - spec.llama3.low_freq_factor);
      break;
    }
    case posenc::Method::kYarn:
    case posenc::Method::kDynamicYarn:
      if (spec.yarn.ramp == posenc::YarnRamp::kPaper) {
        const double ratio = static_cast<double>(spec.original_max_position_embeddings) * w /
                             (2.0 * posenc_ref::kPi);
        dgamma = ratio * e_r / (spec.yarn.beta_fast - spec.yarn.beta_slow);
      } else {
        // (i - lo) / (hi - lo): the subtraction, the division and the origin's rounding
        // (lo * eps, relevant in float32 where lo is rounded).
        dgamma = (4.0 + (static_cast<double>(i) + lo) / std::max(hi - lo, 1e-3)) * eps *
                 std::fabs(spec.yarn.extrapolation_factor);
      }
      break;
    default:
      return 0.0;
  }
  return spread * dgamma;
}

void CheckPreciseVector(const std::string& what, const std::string& where,
                        const std::vector<double>& got, const std::vector<double>& want,
                        const std::vector<double>& extra, Mismatches& mismatches) {
  if (got.size() != want.size()) {
    mismatches.Add(where + ": " + what + " has " + std::to_string(got.size()) +
                   " entries, expected " + std::to_string(want.size()));
    return;
  }
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double tol = PreciseTolerance(want[i]) + (extra.empty() ? 0.0 : extra[i]);
    if (!(std::fabs(got[i] - want[i]) <= tol)) {
      mismatches.Add(where + ": " + what + "[" + std::to_string(i) + "] = " + Num(got[i]) +
                     ", reference " + Num(want[i]) + " (relative error " +
                     Num((got[i] - want[i]) / want[i]) + ", tolerance " +
                     Num(want[i] == 0 ? 0 : tol / std::fabs(want[i])) + ")");
    }
  }
}

void CheckRelative(const std::string& what, const std::string& where, double got, double want,
                   double rel, Mismatches& mismatches) {
  if (!(std::fabs(got - want) <= rel * std::fabs(want))) {
    mismatches.Add(where + ": " + what + " = " + Num(got) + ", reference " + Num(want) +
                   " (relative tolerance " + Num(rel) + ")");
  }
}

bool LogBasedWeight(posenc::Method m) {
  return m == posenc::Method::kNtk || m == posenc::Method::kLongrope;
}

TEST(FrequenciesReferenceTest, PreciseMatchesFloat64Reference) {
  Mismatches mismatches;
  int cases = 0;
  for (const GridCase& c : posenc_test::SpecGrid()) {
    for (std::int64_t seq_len : c.seq_lens) {
      const std::string where = Describe(c.spec, seq_len);
      posenc::Frequencies f;
      try {
        f = posenc::compute_frequencies(c.spec, posenc::Numerics::kPrecise, seq_len);
      } catch (const posenc::Error& e) {
        mismatches.Add(where + ": compute_frequencies threw: " + e.what());
        continue;
      }
      ++cases;
      const posenc_test::PreciseResult ref = posenc_test::PreciseReference(c.spec, seq_len);
      std::vector<double> blend(ref.inv_freq.size(), 0.0);
      if (!ref.unscaled_inv_freq.empty()) {
        for (std::size_t i = 0; i < blend.size(); ++i) {
          blend[i] = BlendTolerance(
              c.spec, ref.scale, i, ref.unscaled_inv_freq[i], ref.interpolation_weight[i], kEps53,
              ref.correction_low.value_or(0.0), ref.correction_high.value_or(1.0));
        }
      }
      CheckPreciseVector("inv_freq", where, f.inv_freq, ref.inv_freq, blend, mismatches);
      if (!ref.unscaled_inv_freq.empty()) {
        CheckPreciseVector("unscaled_inv_freq", where, f.unscaled_inv_freq, ref.unscaled_inv_freq,
                           {}, mismatches);
      }
      CheckRelative("attention_factor", where, f.attention_factor, ref.attention_factor, 2e-15,
                    mismatches);
      CheckRelative("softmax_scale_multiplier", where, f.softmax_scale_multiplier,
                    ref.softmax_scale_multiplier, 2e-15, mismatches);
      if (ref.base) CheckRelative("base", where, f.base, *ref.base, 4e-15, mismatches);
      if (c.spec.method == posenc::Method::kYarn || c.spec.method == posenc::Method::kDynamicYarn) {
        CheckRelative("scale", where, f.scale, ref.scale, 0.0, mismatches);
      }
      if (ref.correction_low) {
        if (!f.correction_low || !f.correction_high) {
          mismatches.Add(where + ": correction_low/high not set");
        } else {
          const double tol = c.spec.yarn.truncate ? 0.0 : 1e-12;
          if (!(std::fabs(*f.correction_low - *ref.correction_low) <= tol) ||
              !(std::fabs(*f.correction_high - *ref.correction_high) <= tol)) {
            mismatches.Add(where + ": correction range " + Num(*f.correction_low) + ".." +
                           Num(*f.correction_high) + ", reference " + Num(*ref.correction_low) +
                           ".." + Num(*ref.correction_high));
          }
        }
      }
      if (c.spec.method == posenc::Method::kLongrope &&
          f.uses_long_factors != ref.uses_long_factors) {
        mismatches.Add(where + ": uses_long_factors " + std::to_string(f.uses_long_factors));
      }
      // Interpolation weights, where the reference defines them.
      if (f.interpolation_weight.size() != ref.interpolation_weight.size()) {
        mismatches.Add(where + ": interpolation_weight has " +
                       std::to_string(f.interpolation_weight.size()) + " entries");
      } else {
        const double tol = LogBasedWeight(c.spec.method) ? 1e-13 : 1e-14;
        for (std::size_t i = 0; i < ref.interpolation_weight.size(); ++i) {
          const double want = ref.interpolation_weight[i];
          if (std::isnan(want)) continue;
          if (!(std::fabs(f.interpolation_weight[i] - want) <= tol)) {
            mismatches.Add(where + ": interpolation_weight[" + std::to_string(i) +
                           "] = " + Num(f.interpolation_weight[i]) + ", reference " + Num(want));
          }
        }
      }
    }
  }
  EXPECT_GT(cases, 10000);
  EXPECT_EQ(mismatches.count(), 0) << "mismatches over " << cases << " cases";
}

TEST(FrequenciesReferenceTest, HfMatchesFloat32EmulationBitForBit) {
  Mismatches mismatches;
  int cases = 0;
  std::int64_t entries = 0;
  for (const GridCase& c : posenc_test::SpecGrid()) {
    if (!posenc_test::HfHas(c.spec)) continue;
    for (std::int64_t seq_len : c.seq_lens) {
      const std::string where = Describe(c.spec, seq_len);
      posenc::Frequencies f;
      try {
        f = posenc::compute_frequencies(c.spec, posenc::Numerics::kHf, seq_len);
      } catch (const posenc::Error& e) {
        mismatches.Add(where + ": compute_frequencies threw: " + e.what());
        continue;
      }
      ++cases;
      const posenc_test::HfResult ref = posenc_test::HfReference(c.spec, seq_len);
      auto check = [&](const char* what, const std::vector<double>& got,
                       const std::vector<float>& want) {
        if (got.size() != want.size()) {
          mismatches.Add(where + ": " + what + " has " + std::to_string(got.size()) +
                         " entries, expected " + std::to_string(want.size()));
          return;
        }
        for (std::size_t i = 0; i < want.size(); ++i) {
          ++entries;
          if (got[i] != static_cast<double>(want[i])) {
            const float g = static_cast<float>(got[i]);
            mismatches.Add(where + ": " + what + "[" + std::to_string(i) + "] = " + Num(got[i]) +
                           ", emulation " + Num(want[i]) + " (" +
                           std::to_string(UlpDistance(g, want[i])) + " float32 ulps" +
                           (static_cast<double>(g) != got[i] ? ", not a float32" : "") + ")");
          }
        }
      };
      check("inv_freq", f.inv_freq, ref.inv_freq);
      if (!ref.unscaled_inv_freq.empty()) {
        check("unscaled_inv_freq", f.unscaled_inv_freq, ref.unscaled_inv_freq);
      }
      // docs/design.md §4: in hf the attention factor is rounded to float32 (the multiplier torch
      // applies to cos and sin).
      const double af32 = static_cast<double>(static_cast<float>(ref.attention_factor));
      if (f.attention_factor != af32) {
        mismatches.Add(where + ": attention_factor = " + Num(f.attention_factor) +
                       ", expected fl32(" + Num(ref.attention_factor) + ") = " + Num(af32));
      }
      // The softmax multiplier is a Python float in DeepSeek's attention (softmax_scale *
      // mscale * mscale): float64 value, or its float32 rounding, within 2^-23 relative.
      CheckRelative("softmax_scale_multiplier", where, f.softmax_scale_multiplier,
                    ref.softmax_scale_multiplier, 0x1p-23, mismatches);
    }
  }
  EXPECT_GT(cases, 8000);
  EXPECT_EQ(mismatches.count(), 0)
      << "mismatches over " << cases << " cases, " << entries << " entries";
}

// The three references describe the same mathematics, so they must be close to each other:
// this checks the references themselves (a reference bug would otherwise hide as a library
// bug, or cancel one). hf vs float64: fl32 of the exponent 2i/D moves w by |ln w| 2^-24; pow,
// reciprocal, a blend add a few float32 roundings; dynamic NTK's float32 base adds up to
// (1.03 ln 361 + 4) 2^-24 < 11 * 2^-24 (s = 40, seq_len = 10 L'). So (|ln w| + 16) 2^-24,
// plus the blend-conditioning term (with float32's unit roundoff) inside blend bands.
TEST(FrequenciesReferenceTest, HfEmulationIsCloseToFloat64Reference) {
  int checked = 0;
  for (const GridCase& c : posenc_test::SpecGrid()) {
    if (!posenc_test::HfHas(c.spec)) continue;
    for (std::int64_t seq_len : c.seq_lens) {
      const posenc_test::PreciseResult p = posenc_test::PreciseReference(c.spec, seq_len);
      const posenc_test::HfResult h = posenc_test::HfReference(c.spec, seq_len);
      ASSERT_EQ(p.inv_freq.size(), h.inv_freq.size()) << Describe(c.spec, seq_len);
      for (std::size_t i = 0; i < p.inv_freq.size(); ++i) {
        const double want = p.inv_freq[i];
        const double blend =
            p.unscaled_inv_freq.empty()
                ? 0.0
                : BlendTolerance(c.spec, p.scale, i, p.unscaled_inv_freq[i],
                                 p.interpolation_weight[i], 0x1p-24, p.correction_low.value_or(0.0),
                                 p.correction_high.value_or(1.0));
        const double tol =
            want == 0 ? 0 : (std::fabs(std::log(want)) + 16.0) * 0x1p-24 * std::fabs(want) + blend;
        ASSERT_LE(std::fabs(h.inv_freq[i] - want), tol)
            << Describe(c.spec, seq_len) << " pair " << i;
        ++checked;
      }
      ASSERT_NEAR(p.attention_factor, h.attention_factor, 1e-15);
    }
  }
  EXPECT_GT(checked, 100000);
}

// ---------------------------------------------------------------------------------------------
// kGgml.

struct GgmlCase {
  posenc::GgmlRopeParams lib;
  posenc_ggml::Params ref;
};

std::string DescribeGgml(const posenc_ggml::Params& p) {
  std::ostringstream os;
  os.precision(9);
  os << "ggml n_dims=" << p.n_dims << " n_ctx_orig=" << p.n_ctx_orig << " freq_base=" << p.freq_base
     << " freq_scale=" << p.freq_scale << " ext_factor=" << p.ext_factor
     << " attn_factor=" << p.attn_factor << " beta=" << p.beta_fast << "/" << p.beta_slow
     << " freq_factors=" << (p.freq_factors.empty() ? "none" : "yes");
  return os.str();
}

std::vector<GgmlCase> GgmlGrid() {
  std::vector<GgmlCase> grid;
  for (int n_dims : {64, 96, 128}) {
    for (float base : {10000.0f, 150000.0f, 500000.0f, 1000000.0f}) {
      for (double factor : {1.0, 2.0, 4.5, 16.0, 40.0}) {
        for (float ext : {0.0f, 1.0f, 0.5f}) {
          for (int factors_kind : {0, 1, 2}) {  // none, LongRoPE-like, proportional (+inf)
            GgmlCase c;
            c.ref.n_dims = n_dims;
            c.ref.freq_base = base;
            c.ref.freq_scale = static_cast<float>(1.0 / factor);
            c.ref.ext_factor = ext;
            c.ref.attn_factor = ext != 0.0f ? 0.9f : 1.0f;
            if (ext != 0.0f) {
              c.ref.n_ctx_orig = 4096;
              c.ref.beta_fast = 32.0f;
              c.ref.beta_slow = 1.0f;
            } else {
              c.ref.n_ctx_orig = 0;  // ggml_rope()'s defaults
              c.ref.beta_fast = 0.0f;
              c.ref.beta_slow = 0.0f;
            }
            const int n = n_dims / 2;
            if (factors_kind == 1) {
              for (double f : posenc_test::LongFactors(n, factor)) {
                c.ref.freq_factors.push_back(static_cast<float>(f));
              }
            } else if (factors_kind == 2) {
              c.ref.freq_factors.assign(static_cast<std::size_t>(n),
                                        std::numeric_limits<float>::infinity());
              for (int i = 0; i < n / 4; ++i) c.ref.freq_factors[i] = 1.0f;
            }
            c.lib.n_dims = c.ref.n_dims;
            c.lib.mode = posenc::GgmlMode::kNeox;
            c.lib.n_ctx_orig = c.ref.n_ctx_orig;
            c.lib.freq_base = c.ref.freq_base;
            c.lib.freq_scale = c.ref.freq_scale;
            c.lib.ext_factor = c.ref.ext_factor;
            c.lib.attn_factor = c.ref.attn_factor;
            c.lib.beta_fast = c.ref.beta_fast;
            c.lib.beta_slow = c.ref.beta_slow;
            c.lib.freq_factors = c.ref.freq_factors;
            grid.push_back(c);
          }
        }
      }
    }
  }
  return grid;
}

TEST(FrequenciesReferenceTest, GgmlMatchesLlamaCppEmulationBitForBit) {
  const std::int64_t positions[] = {0, 1, 2, 7, 4095, 131071, 1 << 20, (1 << 24) + 1, 2147483647};
  Mismatches mismatches;
  int cases = 0;
  for (const GgmlCase& c : GgmlGrid()) {
    const std::string where = DescribeGgml(c.ref);
    posenc::Frequencies f;
    try {
      f = posenc::frequencies_from_ggml(c.lib);
    } catch (const posenc::Error& e) {
      mismatches.Add(where + ": frequencies_from_ggml threw: " + e.what());
      continue;
    }
    ++cases;
    const std::vector<float> angles = posenc_ggml::Angles(c.ref, 1);
    if (f.inv_freq.size() != angles.size()) {
      mismatches.Add(where + ": inv_freq has " + std::to_string(f.inv_freq.size()) + " entries");
      continue;
    }
    for (std::size_t i = 0; i < angles.size(); ++i) {
      if (f.inv_freq[i] != static_cast<double>(angles[i])) {
        mismatches.Add(where + ": inv_freq[" + std::to_string(i) + "] = " + Num(f.inv_freq[i]) +
                       ", emulation " + Num(angles[i]));
      }
    }
    const float mscale = posenc_ggml::Mscale(c.ref);
    if (f.attention_factor != static_cast<double>(mscale)) {
      mismatches.Add(where + ": attention_factor = " + Num(f.attention_factor) +
                     ", emulation mscale " + Num(mscale));
    }
    std::vector<double> cos_got(angles.size()), sin_got(angles.size());
    std::vector<float> cos_want, sin_want;
    for (std::int64_t p : positions) {
      posenc::cos_sin_at(f, p, cos_got, sin_got);
      posenc_ggml::CosSinAt(c.ref, p, cos_want, sin_want);
      for (std::size_t i = 0; i < angles.size(); ++i) {
        if (cos_got[i] != static_cast<double>(cos_want[i]) ||
            sin_got[i] != static_cast<double>(sin_want[i])) {
          mismatches.Add(where + " position " + std::to_string(p) + ": pair " + std::to_string(i) +
                         " cos/sin = " + Num(cos_got[i]) + "/" + Num(sin_got[i]) + ", emulation " +
                         Num(cos_want[i]) + "/" + Num(sin_want[i]));
        }
      }
    }
  }
  EXPECT_GT(cases, 500);
  EXPECT_EQ(mismatches.count(), 0) << "mismatches over " << cases << " cases";
}

// The ggml emulation against the float64 reference: the running product multiplies the
// relative error of theta_scale (|ln theta_scale| 2^-24 from the rounded exponent -2/D, plus
// powf's ulp) by i and adds one rounding per step, so (2 i + |ln w| + 4) 2^-24 relative.
TEST(FrequenciesReferenceTest, GgmlEmulationIsCloseToFloat64Reference) {
  for (int n_dims : {64, 96, 128}) {
    for (float base : {10000.0f, 500000.0f}) {
      posenc_ggml::Params p;
      p.n_dims = n_dims;
      p.freq_base = base;
      const std::vector<float> angles = posenc_ggml::Angles(p, 1);
      const std::vector<double> want = posenc_ref::DefaultInvFreq(n_dims, base);
      for (std::size_t i = 0; i < want.size(); ++i) {
        const double tol =
            (2.0 * static_cast<double>(i) + std::fabs(std::log(want[i])) + 4.0) * 0x1p-24;
        EXPECT_NEAR(angles[i] / want[i], 1.0, tol) << n_dims << " " << base << " pair " << i;
      }
    }
  }
}

// compute_frequencies(spec, kGgml) is frequencies_from_ggml of ggml_params_from_spec, and the
// parameters are those llama.cpp derives from the model (checked against independent values).
TEST(FrequenciesReferenceTest, GgmlFromSpecUsesLlamaCppParameters) {
  Mismatches mismatches;
  int cases = 0;
  for (const GridCase& c : posenc_test::SpecGrid()) {
    const posenc::RopeSpec& spec = c.spec;
    if (spec.head_dim != 128 || spec.rope_theta == 5e5) continue;  // a slice is enough
    if (spec.yarn.ramp == posenc::YarnRamp::kPaper || !spec.yarn.truncate) continue;
    if (spec.method == posenc::Method::kDynamicYarn) continue;
    for (std::int64_t seq_len : c.seq_lens) {
      const std::string where = Describe(spec, seq_len);
      posenc::GgmlRopeParams params;
      posenc::Frequencies f;
      try {
        params = posenc::ggml_params_from_spec(spec, seq_len);
        f = posenc::compute_frequencies(spec, posenc::Numerics::kGgml, seq_len);
      } catch (const posenc::Error& e) {
        mismatches.Add(where + ": threw: " + e.what());
        continue;
      }
      ++cases;
      const posenc::Frequencies g = posenc::frequencies_from_ggml(params);
      if (f.inv_freq != g.inv_freq || f.attention_factor != g.attention_factor) {
        mismatches.Add(where + ": compute_frequencies(kGgml) differs from frequencies_from_ggml");
      }
      const double s = spec.factor;
      const auto d = spec.rotary_dim;
      auto near = [&](const char* what, double got, double want, double rel) {
        if (!(std::fabs(got - want) <= rel * std::fabs(want))) {
          mismatches.Add(where + ": " + what + " = " + Num(got) + ", expected " + Num(want));
        }
      };
      switch (spec.method) {
        case posenc::Method::kNone:
          near("freq_base", params.freq_base, spec.rope_theta, 0x1p-24);
          near("freq_scale", params.freq_scale, 1.0, 0.0);
          break;
        case posenc::Method::kLinear:
          near("freq_scale", params.freq_scale, 1.0 / s, 0x1p-24);
          break;
        case posenc::Method::kNtk:
          near("freq_base", params.freq_base,
               static_cast<double>(posenc_ref::NtkBaseL(d, spec.rope_theta, s)), 0x1p-23);
          break;
        case posenc::Method::kDynamic:
          near("freq_base", params.freq_base,
               static_cast<double>(posenc_ref::DynamicBaseL(d, spec.rope_theta, s,
                                                            spec.max_position_embeddings, seq_len)),
               0x1p-22);
          break;
        case posenc::Method::kYarn: {
          const auto [af, softmax] = posenc_ref::YarnScalars(s, posenc_test::YarnOptionsOf(spec));
          (void)softmax;
          near("freq_scale", params.freq_scale, 1.0 / s, 0x1p-24);
          near("ext_factor", params.ext_factor, spec.yarn.extrapolation_factor, 0.0);
          near("n_ctx_orig", params.n_ctx_orig,
               static_cast<double>(spec.original_max_position_embeddings), 0.0);
          // llama.cpp multiplies cos and sin by attn_factor * (1 + 0.1 ln s) when ext_factor
          // != 0: the product is the YaRN attention factor (float32 arithmetic: 2^-22).
          if (spec.yarn.extrapolation_factor != 0.0) {
            near("mscale", g.attention_factor, af, 0x1p-22);
          }
          break;
        }
        case posenc::Method::kLongrope: {
          const auto& list = seq_len > spec.original_max_position_embeddings
                                 ? spec.longrope.long_factor
                                 : spec.longrope.short_factor;
          if (params.freq_factors.size() != list.size()) {
            mismatches.Add(where + ": freq_factors size " +
                           std::to_string(params.freq_factors.size()));
            break;
          }
          for (std::size_t i = 0; i < list.size(); ++i) {
            near("freq_factors[i]", params.freq_factors[i], list[i], 0x1p-24);
          }
          break;
        }
        case posenc::Method::kLlama3: {
          // convert_hf_to_gguf.py stores w / w_llama3 per pair: 1 kept, s divided, the
          // smooth blend's reciprocal between. It starts from float32 frequencies (error
          // ~3 * 2^-24 in the wavelength), which the blend's reciprocal amplifies by up to
          // s - 1 < 40: 1e-4 relative covers that.
          const posenc_ref::BlendResult l = posenc_ref::Llama3InvFreq(
              d, spec.rope_theta, s, spec.original_max_position_embeddings,
              spec.llama3.low_freq_factor, spec.llama3.high_freq_factor);
          const std::vector<double> plain = posenc_ref::DefaultInvFreq(d, spec.rope_theta);
          if (params.freq_factors.size() != plain.size()) {
            mismatches.Add(where + ": freq_factors size " +
                           std::to_string(params.freq_factors.size()));
            break;
          }
          for (std::size_t i = 0; i < plain.size(); ++i) {
            near("freq_factors[i]", params.freq_factors[i], plain[i] / l.inv_freq[i], 1e-4);
          }
          break;
        }
        default:
          break;
      }
    }
  }
  EXPECT_GT(cases, 500);
  EXPECT_EQ(mismatches.count(), 0) << "mismatches over " << cases << " cases";
}

}  // namespace
