// tests/core/sinusoidal_test.cc: the sinusoidal encoding of "Attention Is All You Need" §3.5
// against a direct float64 evaluation of its formula, and its shift property.
//
//   w_k = base^(-2k/d),  interleaved: PE(p, 2k) = sin(p w_k), PE(p, 2k+1) = cos(p w_k);
//   concatenated: PE(p, k) = sin(p w_k), PE(p, d/2 + k) = cos(p w_k).
//
// Tolerances:
// - w_k: (16 + 2 |ln w|) 2^-53 relative, as for RoPE frequencies (frequencies_reference_test).
// - small positions p < 64, against std::sin(p * w_ref): the double product p * w_ref rounds
//   (p w 2^-53), and the library's w may differ from w_ref by the tolerance above (p times
//   ~4e-15 w), so (p + 1) 8e-15 + 2^-52 absolute.
// - large positions (up to 2^31 - 1), against the exact reference applied to the library's own
//   w_k (so that an ulp of w, multiplied by 2^31, does not swamp the check): 2^-51 absolute.
// - shift property PE(p + D) = T(D) PE(p): 1e-12 absolute (a 2x2 product of values within an
//   ulp or two of exact, at most ~1e-15, with a wide margin for the angle D w of T itself).
#include "posenc/core/sinusoidal.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "posenc/core/error.h"
#include "reference/rope_reference.h"

namespace {

using posenc::SinusoidalLayout;
using posenc::SinusoidalSpec;

SinusoidalSpec Spec(std::int64_t d, double base, SinusoidalLayout layout) {
  SinusoidalSpec spec;
  spec.d_model = d;
  spec.base = base;
  spec.layout = layout;
  return spec;
}

// Column of sin(p w_k) and of cos(p w_k) in a row.
std::int64_t SinColumn(const SinusoidalSpec& spec, std::int64_t k) {
  return spec.layout == SinusoidalLayout::kInterleaved ? 2 * k : k;
}
std::int64_t CosColumn(const SinusoidalSpec& spec, std::int64_t k) {
  return spec.layout == SinusoidalLayout::kInterleaved ? 2 * k + 1 : spec.d_model / 2 + k;
}

std::vector<SinusoidalSpec> Specs() {
  std::vector<SinusoidalSpec> specs;
  for (SinusoidalLayout layout :
       {SinusoidalLayout::kInterleaved, SinusoidalLayout::kConcatenated}) {
    for (std::int64_t d : {2, 4, 6, 64, 512}) {
      for (double base : {10000.0, 500.0, 1e6}) specs.push_back(Spec(d, base, layout));
    }
  }
  return specs;
}

std::string Name(const SinusoidalSpec& spec) {
  return "d_model=" + std::to_string(spec.d_model) + " base=" + std::to_string(spec.base) +
         (spec.layout == SinusoidalLayout::kInterleaved ? " interleaved" : " concatenated");
}

TEST(SinusoidalTest, FrequenciesMatchFormula) {
  for (const SinusoidalSpec& spec : Specs()) {
    SCOPED_TRACE(Name(spec));
    const std::vector<double> w = posenc::sinusoidal_frequencies(spec);
    ASSERT_EQ(static_cast<std::int64_t>(w.size()), spec.d_model / 2);
    const std::vector<double> ref = posenc_ref::DefaultInvFreq(spec.d_model, spec.base);
    for (std::size_t k = 0; k < w.size(); ++k) {
      const double tol = (16.0 + 2.0 * std::fabs(std::log(ref[k]))) * 0x1p-53 * ref[k];
      EXPECT_NEAR(w[k], ref[k], tol) << "k " << k;
    }
    EXPECT_EQ(w[0], 1.0);
  }
}

TEST(SinusoidalTest, TableMatchesDirectFormulaAtSmallPositions) {
  for (const SinusoidalSpec& spec : Specs()) {
    SCOPED_TRACE(Name(spec));
    const std::int64_t d = spec.d_model;
    const std::vector<double> ref_w = posenc_ref::DefaultInvFreq(d, spec.base);
    const std::int64_t count = 64;
    const std::vector<double> table = posenc::sinusoidal_table(spec, count);
    ASSERT_EQ(static_cast<std::int64_t>(table.size()), count * d);
    for (std::int64_t p = 0; p < count; ++p) {
      const double tol = static_cast<double>(p + 1) * 8e-15 + 0x1p-52;
      for (std::int64_t k = 0; k < d / 2; ++k) {
        const double angle = static_cast<double>(p) * ref_w[k];
        EXPECT_NEAR(table[p * d + SinColumn(spec, k)], std::sin(angle), tol) << p << " " << k;
        EXPECT_NEAR(table[p * d + CosColumn(spec, k)], std::cos(angle), tol) << p << " " << k;
      }
    }
    // Position 0: sin 0 = 0, cos 0 = 1, exactly.
    for (std::int64_t k = 0; k < d / 2; ++k) {
      EXPECT_EQ(table[SinColumn(spec, k)], 0.0);
      EXPECT_EQ(table[CosColumn(spec, k)], 1.0);
    }
  }
}

TEST(SinusoidalTest, RowsAndTablesMatchExactReferenceAtLargePositions) {
  const std::int64_t firsts[] = {4095, 131071, 123456789, (std::int64_t{1} << 31) - 8};
  for (const SinusoidalSpec& spec : Specs()) {
    SCOPED_TRACE(Name(spec));
    const std::int64_t d = spec.d_model;
    const std::vector<double> w = posenc::sinusoidal_frequencies(spec);
    for (std::int64_t first : firsts) {
      const std::int64_t count = 8;
      const std::vector<double> table = posenc::sinusoidal_table(spec, count, first);
      ASSERT_EQ(static_cast<std::int64_t>(table.size()), count * d);
      std::vector<double> row(static_cast<std::size_t>(d));
      for (std::int64_t r = 0; r < count; ++r) {
        const std::int64_t p = first + r;
        posenc::sinusoidal_row(spec, p, row);
        for (std::int64_t k = 0; k < d / 2; ++k) {
          double s = 0, c = 0;
          posenc_ref::ExactSinCos(p, w[k], s, c);
          EXPECT_NEAR(table[r * d + SinColumn(spec, k)], s, 0x1p-51) << p << " " << k;
          EXPECT_NEAR(table[r * d + CosColumn(spec, k)], c, 0x1p-51) << p << " " << k;
          EXPECT_NEAR(row[SinColumn(spec, k)], s, 0x1p-51) << p << " " << k;
          EXPECT_NEAR(row[CosColumn(spec, k)], c, 0x1p-51) << p << " " << k;
        }
      }
    }
  }
}

TEST(SinusoidalTest, AddSinusoidalAddsExactlyTheRow) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> dist(-3.0, 3.0);
  for (SinusoidalLayout layout :
       {SinusoidalLayout::kInterleaved, SinusoidalLayout::kConcatenated}) {
    const SinusoidalSpec spec = Spec(64, 10000.0, layout);
    const std::int64_t rows = 5, first = 1000;
    std::vector<double> emb_d(rows * 64);
    std::vector<float> emb_f(rows * 64);
    for (std::size_t i = 0; i < emb_d.size(); ++i) {
      emb_d[i] = dist(rng);
      emb_f[i] = static_cast<float>(dist(rng));
    }
    const std::vector<double> orig_d = emb_d;
    const std::vector<float> orig_f = emb_f;
    posenc::add_sinusoidal(spec, std::span<double>(emb_d), rows, first);
    posenc::add_sinusoidal(spec, std::span<float>(emb_f), rows, first);
    std::vector<double> row(64);
    for (std::int64_t r = 0; r < rows; ++r) {
      posenc::sinusoidal_row(spec, first + r, row);
      for (std::int64_t j = 0; j < 64; ++j) {
        const std::size_t at = static_cast<std::size_t>(r * 64 + j);
        EXPECT_EQ(emb_d[at], orig_d[at] + row[j]) << r << " " << j;
        // float: either the double sum rounded once, or the row rounded then added.
        const float once = static_cast<float>(static_cast<double>(orig_f[at]) + row[j]);
        const float twice = orig_f[at] + static_cast<float>(row[j]);
        EXPECT_TRUE(emb_f[at] == once || emb_f[at] == twice)
            << r << " " << j << ": " << emb_f[at] << " vs " << once;
      }
    }
    // Size mismatch: refused.
    std::vector<double> wrong(rows * 64 - 1);
    EXPECT_THROW(posenc::add_sinusoidal(spec, std::span<double>(wrong), rows, first),
                 posenc::Error);
  }
}

TEST(SinusoidalTest, ShiftMatrixMovesEncodingsByDelta) {
  const std::int64_t deltas[] = {0, 1, 2, 5, 17, 100, 1000, -1, -3, -100, -999};
  const std::int64_t starts[] = {1000, 1001, 1234, 5000, 77777, 1 << 20};
  for (SinusoidalLayout layout :
       {SinusoidalLayout::kInterleaved, SinusoidalLayout::kConcatenated}) {
    for (std::int64_t d : {2, 8, 64}) {
      const SinusoidalSpec spec = Spec(d, 10000.0, layout);
      // The library's own w_k (checked in FrequenciesMatchFormula): D * (an ulp of w) must
      // not count against the 1e-12 here.
      const std::vector<double> w = posenc::sinusoidal_frequencies(spec);
      for (std::int64_t delta : deltas) {
        SCOPED_TRACE(Name(spec) + " delta " + std::to_string(delta));
        // T(delta) computed once, then used at every p: it does not depend on p.
        const std::vector<double> t = posenc::sinusoidal_shift_matrix(spec, delta);
        ASSERT_EQ(static_cast<std::int64_t>(t.size()), d * d);
        // Structure: the 2x2 rotation by delta w_k on (sin, cos) columns, zero elsewhere.
        for (std::int64_t i = 0; i < d; ++i) {
          for (std::int64_t j = 0; j < d; ++j) {
            double want = 0.0;
            for (std::int64_t k = 0; k < d / 2; ++k) {
              double sb = 0, cb = 0;
              posenc_ref::ExactSinCos(delta, w[k], sb, cb);
              const std::int64_t si = SinColumn(spec, k), ci = CosColumn(spec, k);
              // [sin(a+b)]   [ cos b  sin b][sin a]
              // [cos(a+b)] = [-sin b  cos b][cos a]
              if (i == si && j == si) want = cb;
              if (i == si && j == ci) want = sb;
              if (i == ci && j == si) want = -sb;
              if (i == ci && j == ci) want = cb;
            }
            if (want == 0.0) {
              EXPECT_EQ(t[i * d + j], 0.0) << i << "," << j;
            } else {
              EXPECT_NEAR(t[i * d + j], want, 1e-12) << i << "," << j;
            }
          }
        }
        std::vector<double> pe(d), shifted(d);
        for (std::int64_t p : starts) {
          posenc::sinusoidal_row(spec, p, pe);
          posenc::sinusoidal_row(spec, p + delta, shifted);
          for (std::int64_t i = 0; i < d; ++i) {
            double sum = 0.0;
            for (std::int64_t j = 0; j < d; ++j) sum += t[i * d + j] * pe[j];
            EXPECT_NEAR(sum, shifted[i], 1e-12) << "p " << p << " dim " << i;
          }
        }
      }
    }
  }
}

TEST(SinusoidalTest, ShiftMatrixOfZeroIsIdentity) {
  const SinusoidalSpec spec = Spec(16, 10000.0, SinusoidalLayout::kInterleaved);
  const std::vector<double> t = posenc::sinusoidal_shift_matrix(spec, 0);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) EXPECT_EQ(t[i * 16 + j], i == j ? 1.0 : 0.0) << i << "," << j;
  }
}

void ExpectRejected(const SinusoidalSpec& spec, const std::string& field,
                    const std::string& value) {
  try {
    posenc::validate(spec);
    ADD_FAILURE() << "validate accepted " << field << " = " << value;
  } catch (const posenc::Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find(field), std::string::npos) << message;
    EXPECT_NE(message.find(value), std::string::npos) << message;
  }
  EXPECT_THROW(posenc::sinusoidal_table(spec, 1), posenc::Error) << field << " " << value;
}

TEST(SinusoidalTest, ValidateNamesFieldAndValue) {
  ExpectRejected(Spec(7, 10000.0, SinusoidalLayout::kInterleaved), "d_model", "7");
  ExpectRejected(Spec(0, 10000.0, SinusoidalLayout::kInterleaved), "d_model", "0");
  ExpectRejected(Spec(-4, 10000.0, SinusoidalLayout::kConcatenated), "d_model", "-4");
  ExpectRejected(Spec(64, 0.0, SinusoidalLayout::kInterleaved), "base", "0");
  ExpectRejected(Spec(64, -1.0, SinusoidalLayout::kInterleaved), "base", "-1");
  EXPECT_NO_THROW(posenc::validate(Spec(64, 10000.0, SinusoidalLayout::kInterleaved)));
}

TEST(Sinusoidal, LayoutNamesParseBack) {
  for (SinusoidalLayout l : {SinusoidalLayout::kInterleaved, SinusoidalLayout::kConcatenated}) {
    EXPECT_EQ(posenc::parse_sinusoidal_layout(posenc::sinusoidal_layout_name(l)), l);
  }
  EXPECT_EQ(posenc::sinusoidal_layout_name(SinusoidalLayout::kInterleaved), "interleaved");
  EXPECT_EQ(posenc::sinusoidal_layout_name(SinusoidalLayout::kConcatenated), "concatenated");
  try {
    posenc::parse_sinusoidal_layout("half-split", "--layout");
    ADD_FAILURE() << "half-split accepted";
  } catch (const posenc::Error& e) {
    EXPECT_STREQ(e.what(), "--layout (\"half-split\") must be interleaved or concatenated");
  }
}

}  // namespace
