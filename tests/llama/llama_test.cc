// The Llama forward pass against an independent float64 reference, and the properties of the
// perplexity protocol: thread-count independence, every method the identity at s = 1, dynamic
// methods' re-rotated caches, and loading errors that name what is wrong.
//
// The reference below reads the model file itself and computes in double with naive loops and
// its own RoPE (cos/sin of p * 10000^(-2i/8) from the formula); it shares no code with src/.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/llama/llama.h"
#include "posenc/llama/perplexity.h"
#include "support/error_of.h"
#include "support/simd_targets.h"

namespace {

const std::string kModel =
    std::string(POSENC_SHARED_DIR) + "/models/stories260K/tinystories_260k_v1.bin";
const std::string kPride = std::string(POSENC_SHARED_DIR) + "/data/austen/prideprejudice.txt";

std::vector<unsigned char> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

const posenc::llama::Model& model() {
  static const posenc::llama::Model m = posenc::llama::Model::load(kModel);
  return m;
}

const std::vector<std::int32_t>& pride_tokens() {
  static const std::vector<std::int32_t> t = model().tokenizer().encode(read_text(kPride));
  return t;
}

// ---------------------------------------------------------------------------------------------
// Float64 reference, written from the README's layout and the Llama 2 formulas.

struct Reference {
  int dim = 0, hidden = 0, seq = 0, vocab = 0, layers = 0, heads = 0, kv_heads = 0;
  std::vector<double> emb, att_norm, wq, wk, wv, wo, ffn_norm, w_gate, w_up, w_down, final_norm;

  explicit Reference(const std::string& path) {
    const std::vector<unsigned char> b = read_bytes(path);
    std::size_t o = 1;
    auto i32 = [&] {
      std::int32_t v;
      std::memcpy(&v, b.data() + o, 4);
      o += 4;
      return v;
    };
    o += static_cast<std::size_t>(i32());  // "llama"
    dim = i32(), hidden = i32(), seq = i32(), vocab = i32(), layers = i32(), heads = i32(),
    kv_heads = i32();
    o = 256;
    for (int i = 0; i < vocab; ++i) {
      o += 4;
      o += static_cast<std::size_t>(i32());
    }
    auto floats = [&](std::size_t n) {
      std::vector<double> v(n);
      for (std::size_t i = 0; i < n; ++i) {
        float f;
        std::memcpy(&f, b.data() + o, 4);
        o += 4;
        v[i] = f;
      }
      return v;
    };
    const auto H = static_cast<std::size_t>(dim), I = static_cast<std::size_t>(hidden),
               V = static_cast<std::size_t>(vocab), L = static_cast<std::size_t>(layers),
               KV = static_cast<std::size_t>(kv_heads * (dim / heads));
    emb = floats(V * H);
    att_norm = floats(L * H);
    wq = floats(L * H * H);
    wk = floats(L * KV * H);
    wv = floats(L * KV * H);
    wo = floats(L * H * H);
    ffn_norm = floats(L * H);
    w_gate = floats(L * I * H);
    w_up = floats(L * I * H);
    w_down = floats(L * H * I);
    final_norm = floats(H);
    EXPECT_EQ(o, b.size());
  }

  // y = W x, W [rows, cols] row-major at `w`.
  static std::vector<double> matvec(const double* w, const std::vector<double>& x,
                                    std::size_t rows) {
    std::vector<double> y(rows, 0.0);
    for (std::size_t r = 0; r < rows; ++r) {
      for (std::size_t c = 0; c < x.size(); ++c) y[r] += w[r * x.size() + c] * x[c];
    }
    return y;
  }
  static std::vector<double> rmsnorm(const std::vector<double>& x, const double* w) {
    double ss = 0;
    for (double v : x) ss += v * v;
    const double s = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + 1e-5);
    std::vector<double> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) y[i] = w[i] * x[i] * s;
    return y;
  }

  // Rotation of each head's interleaved pairs (2i, 2i+1) by p * inv_freq[i], times af.
  static void rotate(double* head, int head_dim, double p, const std::vector<double>& inv_freq,
                     double af) {
    for (int i = 0; i < head_dim / 2; ++i) {
      const double c = af * std::cos(p * inv_freq[static_cast<std::size_t>(i)]);
      const double s = af * std::sin(p * inv_freq[static_cast<std::size_t>(i)]);
      const double a = head[2 * i], b = head[2 * i + 1];
      head[2 * i] = a * c - b * s;
      head[2 * i + 1] = b * c + a * s;
    }
  }

  // Logits of every position. freqs_at(t) gives (inv_freq, attention factor) in effect when
  // token t runs; the cached keys are kept unrotated and rotated with that token's frequencies
  // (a dynamic method with a perfectly re-rotated cache; static methods give the same every t).
  template <class FreqsAt>
  std::vector<std::vector<double>> forward(const std::vector<std::int32_t>& tokens,
                                           FreqsAt freqs_at) const {
    const int hd = dim / heads, kvd = kv_heads * hd;
    const auto H = static_cast<std::size_t>(dim), I = static_cast<std::size_t>(hidden);
    const std::size_t n = tokens.size();
    std::vector<std::vector<std::vector<double>>> keys(static_cast<std::size_t>(layers)),
        values(keys.size());
    std::vector<std::vector<double>> logits;
    for (std::size_t t = 0; t < n; ++t) {
      const auto [inv_freq, af] = freqs_at(t);
      std::vector<double> x(emb.begin() + static_cast<std::ptrdiff_t>(tokens[t] * H),
                            emb.begin() + static_cast<std::ptrdiff_t>((tokens[t] + 1) * H));
      for (std::size_t l = 0; l < static_cast<std::size_t>(layers); ++l) {
        const auto xb = rmsnorm(x, att_norm.data() + l * H);
        auto q = matvec(wq.data() + l * H * H, xb, H);
        keys[l].push_back(matvec(wk.data() + l * kvd * H, xb, static_cast<std::size_t>(kvd)));
        values[l].push_back(matvec(wv.data() + l * kvd * H, xb, static_cast<std::size_t>(kvd)));
        for (int h = 0; h < heads; ++h)
          rotate(q.data() + h * hd, hd, static_cast<double>(t), inv_freq, af);
        std::vector<std::vector<double>> k_rot = keys[l];
        for (std::size_t j = 0; j <= t; ++j) {
          for (int g = 0; g < kv_heads; ++g)
            rotate(k_rot[j].data() + g * hd, hd, static_cast<double>(j), inv_freq, af);
        }
        std::vector<double> att(H, 0.0);
        for (int h = 0; h < heads; ++h) {
          const int g = h / (heads / kv_heads);
          std::vector<double> sc(t + 1);
          double mx = -INFINITY;
          for (std::size_t j = 0; j <= t; ++j) {
            double dot = 0;
            for (int e = 0; e < hd; ++e)
              dot += q[static_cast<std::size_t>(h * hd + e)] *
                     k_rot[j][static_cast<std::size_t>(g * hd + e)];
            sc[j] = dot / std::sqrt(static_cast<double>(hd));
            mx = std::max(mx, sc[j]);
          }
          double sum = 0;
          for (double& s : sc) sum += (s = std::exp(s - mx));
          for (std::size_t j = 0; j <= t; ++j) {
            for (int e = 0; e < hd; ++e) {
              att[static_cast<std::size_t>(h * hd + e)] +=
                  sc[j] / sum * values[l][j][static_cast<std::size_t>(g * hd + e)];
            }
          }
        }
        const auto o = matvec(wo.data() + l * H * H, att, H);
        for (std::size_t i = 0; i < H; ++i) x[i] += o[i];
        const auto xf = rmsnorm(x, ffn_norm.data() + l * H);
        const auto g1 = matvec(w_gate.data() + l * I * H, xf, I);
        const auto u = matvec(w_up.data() + l * I * H, xf, I);
        std::vector<double> hb(I);
        for (std::size_t i = 0; i < I; ++i) hb[i] = g1[i] / (1.0 + std::exp(-g1[i])) * u[i];
        const auto down = matvec(w_down.data() + l * H * I, hb, H);
        for (std::size_t i = 0; i < H; ++i) x[i] += down[i];
      }
      logits.push_back(
          matvec(emb.data(), rmsnorm(x, final_norm.data()), static_cast<std::size_t>(vocab)));
    }
    return logits;
  }
};

// max over tokens of max_i |a_i - b_i| / max_i |b_i|.
double logit_error(const std::vector<float>& got, const std::vector<std::vector<double>>& want) {
  double worst = 0;
  for (std::size_t t = 0; t < want.size(); ++t) {
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < want[t].size(); ++i) {
      diff =
          std::max(diff, std::abs(static_cast<double>(got[t * want[t].size() + i]) - want[t][i]));
      scale = std::max(scale, std::abs(want[t][i]));
    }
    worst = std::max(worst, diff / scale);
  }
  return worst;
}

std::vector<std::int32_t> prompt(std::size_t n) {
  std::vector<std::int32_t> t(pride_tokens().begin(),
                              pride_tokens().begin() + static_cast<std::ptrdiff_t>(n));
  t[0] = model().tokenizer().bos_id();
  return t;
}

// Logits of every token; `piece` > 0 feeds the tokens to forward() that many at a time.
std::vector<float> run(const posenc::RopeSpec& spec, const std::vector<std::int32_t>& tokens,
                       int threads, std::int64_t step, std::size_t piece = 0) {
  posenc::llama::Session s(model(), {.rope = spec,
                                     .capacity = static_cast<std::int64_t>(tokens.size()),
                                     .threads = threads,
                                     .step = step});
  const std::size_t vocab = static_cast<std::size_t>(model().config().vocab_size);
  std::vector<float> logits(tokens.size() * vocab);
  if (piece == 0) piece = tokens.size();
  for (std::size_t i = 0; i < tokens.size(); i += piece) {
    const std::size_t n = std::min(piece, tokens.size() - i);
    s.forward(std::span<const std::int32_t>(tokens.data() + i, n),
              std::span<float>(logits.data() + i * vocab, n * vocab));
  }
  return logits;
}

TEST(LlamaForward, MatchesFloat64ReferenceWithPlainRope) {
  const Reference ref(kModel);
  ASSERT_EQ(ref.dim, 64);
  ASSERT_EQ(ref.heads, 8);
  const auto tokens = prompt(300);
  // Plain RoPE from the formula: w_i = 10000^(-2i/8).
  std::vector<double> inv_freq;
  for (int i = 0; i < 4; ++i) inv_freq.push_back(std::pow(10000.0, -2.0 * i / 8.0));
  const auto want = ref.forward(tokens, [&](std::size_t) { return std::pair{inv_freq, 1.0}; });
  const auto got = run(model().rope_spec("none"), tokens, 2, 64);
  const double err = logit_error(got, want);
  RecordProperty("max_relative_logit_error", std::to_string(err));
  EXPECT_LT(err, 1e-5);
}

// The forward's kernels (matmul, attention, silu, RoPE) on every SIMD target this machine has,
// forced for all of them at once. Tolerance: each float32 sum of K products is within
// K 2^-24 of its sum of magnitudes (separate multiply and add, Higham's gamma_K); with
// K <= 172 (the hidden width; attention sums at most 130 keys) that is <= 1.1e-5 relative per
// dot product in the worst case and about sqrt(K) 2^-24 ~ 1e-6 typically, as rounding errors
// cancel at random, and RMS norms keep it from growing through the 5 residual layers. Measured
// (the test's properties) on AVX2, SSE4, SSSE3 and SCALAR: 1.2e-6 to 1.7e-6. 1e-5 is the bound of
// the tests above, now on every target. 130 tokens with steps of 37: ragged attention tiles and
// ragged matmul rows on every width.
TEST(LlamaForward, MatchesFloat64ReferenceOnEveryTarget) {
  const Reference ref(kModel);
  const auto tokens = prompt(130);
  std::vector<double> inv_freq;
  for (int i = 0; i < 4; ++i) inv_freq.push_back(std::pow(10000.0, -2.0 * i / 8.0));
  const auto want = ref.forward(tokens, [&](std::size_t) { return std::pair{inv_freq, 1.0}; });
  posenc_test::ForEachTarget([&](const std::string& target) {
    const auto got = run(model().rope_spec("none"), tokens, 2, 37);
    const double err = logit_error(got, want);
    char text[32];
    std::snprintf(text, sizeof text, "%.3g", err);
    RecordProperty("max_relative_logit_error_" + target, text);
    EXPECT_LT(err, 1e-5) << target;
    EXPECT_EQ(got, run(model().rope_spec("none"), tokens, 1, 130))
        << target << ": threads and steps change the bits";
  });
}

TEST(LlamaForward, MatchesFloat64ReferenceWithYarn) {
  // YaRN, s = 4, L = 512, D = 8, b = 10000, by hand: correction dims floor(8 ln(512/(2 pi 32)) /
  // (2 ln 10000)) = floor(0.41) = 0 and ceil(8 ln(512/(2 pi)) / (2 ln 10000)) = ceil(1.91) = 2,
  // so ramp_i = i/2: pair 0 kept, pair 1 half way, pairs 2 and 3 divided by s; attention factor
  // 0.1 ln 4 + 1.
  const Reference ref(kModel);
  const auto tokens = prompt(200);
  std::vector<double> inv_freq;
  const double extrapolate[] = {1.0, 0.5, 0.0, 0.0};
  for (int i = 0; i < 4; ++i) {
    const double w = std::pow(10000.0, -2.0 * i / 8.0);
    inv_freq.push_back(w / 4.0 * (1.0 - extrapolate[i]) + w * extrapolate[i]);
  }
  const double af = 0.1 * std::log(4.0) + 1.0;
  const auto want = ref.forward(tokens, [&](std::size_t) { return std::pair{inv_freq, af}; });
  const auto got = run(model().rope_spec("yarn", 4.0), tokens, 1, 37);
  EXPECT_LT(logit_error(got, want), 1e-5);
}

// Dynamic methods: frequencies recomputed per step for the length at its end, cached keys
// re-rotated with rerotate_keys. The reference rotates unrotated keys afresh for every token.
// L is lowered to 64 so that 250 tokens cross it; the frequencies per length come from posenc.
void check_dynamic(const std::string& method) {
  const Reference ref(kModel);
  const auto tokens = prompt(250);
  posenc::RopeSpec spec = model().rope_spec(method, method == "dynamic" ? 2.0 : 1.0);
  spec.original_max_position_embeddings = 64;
  if (spec.method == posenc::Method::kDynamic) spec.max_position_embeddings = 64;
  const std::int64_t step = 32;
  const auto want = ref.forward(tokens, [&](std::size_t t) {
    const std::int64_t end = std::min<std::int64_t>(
        (static_cast<std::int64_t>(t) / step + 1) * step, static_cast<std::int64_t>(tokens.size()));
    const posenc::Frequencies f =
        posenc::compute_frequencies(spec, posenc::Numerics::kPrecise, end);
    return std::pair{f.inv_freq, f.attention_factor};
  });
  posenc::llama::Session s(model(), {.rope = spec, .capacity = 250, .threads = 2, .step = step});
  std::vector<float> got(tokens.size() * 512);
  s.forward(tokens, got);
  EXPECT_EQ(s.rerotations(), 6) << method
                                << ": lengths 96, 128, ..., 250 each change the frequencies";
  EXPECT_LT(logit_error(got, want), 1e-5) << method;

  // Decoding: one token per call, so a step per token, new frequencies and a re-rotation of the
  // cache (and of the decoder's key blocks) at every length past L; reset() in between.
  const auto want_decoded = ref.forward(tokens, [&](std::size_t t) {
    const posenc::Frequencies f = posenc::compute_frequencies(spec, posenc::Numerics::kPrecise,
                                                              static_cast<std::int64_t>(t) + 1);
    return std::pair{f.inv_freq, f.attention_factor};
  });
  const auto decode = [&](const std::vector<std::int32_t>& ids) {
    s.reset();
    for (std::size_t t = 0; t < ids.size(); ++t)
      s.forward(std::span<const std::int32_t>(ids.data() + t, 1),
                std::span<float>(got.data() + t * 512, 512));
    return got;
  };
  const auto decoded = decode(tokens);
  EXPECT_EQ(s.rerotations(), 250 - 64) << method;
  EXPECT_LT(logit_error(decoded, want_decoded), 1e-5) << method << " decoded";
  decode(std::vector<std::int32_t>(tokens.rbegin(), tokens.rend()));
  EXPECT_EQ(decode(tokens), decoded) << method << ": reset() leaves nothing of the last sequence";
}

TEST(LlamaForward, DynamicYarnRerotatedCacheMatchesReference) { check_dynamic("dynamic-yarn"); }
TEST(LlamaForward, DynamicNtkRerotatedCacheMatchesReference) { check_dynamic("dynamic"); }

// Dynamic methods run in batches of up to 256 tokens whose projections and feed-forward block
// span their steps, with RoPE, the re-rotation of the cache and attention step by step inside each
// layer. Fed one step per forward() call, each batch is a single step: the forward pass in steps,
// every stage per step, as it ran before batches. Both must give the same logits bit for bit and
// the same re-rotations, on every target, for steps of 64 (4 a batch), 37 (6 ragged steps a
// batch), 3 (steps that decode with key blocks) and 1 (one token, attention by kv head), with L
// lowered to 64 so that 300 tokens cross it at once; and on 1 and 2 threads.
TEST(LlamaForward, DynamicBatchesGiveTheBitsOfOneCallPerStep) {
  const auto tokens = prompt(300);
  const std::size_t vocab = static_cast<std::size_t>(model().config().vocab_size);
  posenc_test::ForEachTarget([&](const std::string& target) {
    for (const char* method : {"dynamic", "dynamic-yarn"}) {
      posenc::RopeSpec spec =
          model().rope_spec(method, method == std::string("dynamic") ? 4.0 : 1.0);
      spec.original_max_position_embeddings = 64;
      if (spec.method == posenc::Method::kDynamic) spec.max_position_embeddings = 64;
      for (const std::int64_t step : {64, 37, 3, 1}) {
        const auto logits = [&](std::size_t piece, int threads, std::int64_t& rerotations) {
          posenc::llama::Session s(model(), {.rope = spec,
                                             .capacity = static_cast<std::int64_t>(tokens.size()),
                                             .threads = threads,
                                             .step = step});
          std::vector<float> out(tokens.size() * vocab);
          for (std::size_t i = 0; i < tokens.size(); i += piece) {
            const std::size_t n = std::min(piece, tokens.size() - i);
            s.forward(std::span<const std::int32_t>(tokens.data() + i, n),
                      std::span<float>(out.data() + i * vocab, n * vocab));
          }
          rerotations = s.rerotations();
          return out;
        };
        std::int64_t batched_rerotations = 0, stepped_rerotations = 0, one_thread = 0;
        const auto batched = logits(tokens.size(), 2, batched_rerotations);
        const auto stepped = logits(static_cast<std::size_t>(step), 2, stepped_rerotations);
        EXPECT_EQ(batched, stepped) << target << " " << method << " step " << step;
        EXPECT_EQ(batched_rerotations, stepped_rerotations) << method << " step " << step;
        // Every step ending past L has new frequencies; the first such step re-rotates too,
        // because the cache holds the steps before it.
        const std::int64_t first_past = 64 / step * step;  // the first step ending past 64
        EXPECT_EQ(batched_rerotations, (300 - first_past + step - 1) / step)
            << method << " step " << step;
        EXPECT_EQ(batched, logits(tokens.size(), 1, one_thread)) << method << " step " << step;
      }
    }
  });
}

TEST(LlamaForward, IndependentOfThreadsAndStepForStaticMethods) {
  const auto tokens = prompt(150);
  const auto spec = model().rope_spec("yarn-paper", 2.0);
  const auto a = run(spec, tokens, 1, 150);
  EXPECT_EQ(a, run(spec, tokens, 2, 150));
  EXPECT_EQ(a, run(spec, tokens, 2, 64, 1));  // one token per call: decoding
  EXPECT_EQ(a, run(spec, tokens, 1, 64, 17));
}

// ---------------------------------------------------------------------------------------------
// Perplexity.

posenc::llama::PerplexityResult ppl(const std::string& method, double factor, std::int64_t ctx,
                                    std::int64_t max_tokens, int threads) {
  posenc::llama::PerplexityOptions o;
  o.ctx = ctx;
  o.max_tokens = max_tokens;
  o.threads = threads;
  return posenc::llama::perplexity(model(), model().rope_spec(method, factor), pride_tokens(), o);
}

TEST(LlamaPerplexity, SameOnOneAndTwoThreads) {
  for (const char* method : {"yarn", "dynamic-yarn", "dynamic"}) {
    const auto one = ppl(method, 2.0, 1024, 3072, 1);
    const auto two = ppl(method, 2.0, 1024, 3072, 2);
    ASSERT_EQ(one.windows, 3);
    EXPECT_EQ(one.tokens_scored, 3 * 512);
    EXPECT_EQ(one.perplexity, two.perplexity) << method;
    EXPECT_EQ(one.nll_sum, two.nll_sum)
        << method << ": the forward pass is bit for bit thread-independent";
  }
}

TEST(LlamaPerplexity, EveryMethodIsTheIdentityAtTheTrainedContext) {
  // ctx 512 = L: s = 1, and dynamic methods never pass L.
  const auto none = ppl("none", 1.0, 512, 2048, 2);
  ASSERT_EQ(none.windows, 4);
  EXPECT_GT(none.perplexity, 1.0);
  EXPECT_LT(none.perplexity, 1000.0);
  for (const char* method :
       {"linear", "ntk", "yarn", "yarn-paper", "dynamic", "dynamic-yarn", "llama3"}) {
    const auto r = ppl(method, 1.0, 512, 2048, 2);
    EXPECT_NEAR(r.perplexity, none.perplexity, 1e-6 * none.perplexity) << method;
    EXPECT_EQ(r.rerotations, 0) << method;
  }
}

TEST(LlamaPerplexity, WindowsAndSlidingWindowCounts) {
  const std::vector<std::int32_t> tokens(pride_tokens().begin(), pride_tokens().begin() + 1000);
  posenc::llama::PerplexityOptions o;
  o.ctx = 256;
  o.max_tokens = 900;
  const auto spec = model().rope_spec("none");
  auto r = posenc::llama::perplexity(model(), spec, tokens, o);
  EXPECT_EQ(r.windows, 3);  // floor(900 / 256)
  EXPECT_EQ(r.tokens_scored, 3 * 128);
  // BOS + tokens [0,255) [128,383) [256,511) ... [640,895) [768,900): each token scored once.
  o.stride = 128;
  r = posenc::llama::perplexity(model(), spec, tokens, o);
  EXPECT_EQ(r.windows, 7);
  EXPECT_EQ(r.tokens_scored, 900);
  EXPECT_EQ(r.tokens_run, 6 * 256 + 1 + 132);
  o.stride = 256;  // must leave the BOS room
  EXPECT_THROW(posenc::llama::perplexity(model(), spec, tokens, o), posenc::Error);
}

// ---------------------------------------------------------------------------------------------
// Loading.

std::string load_error(const std::vector<unsigned char>& bytes) {
  return posenc::testing::error_of([&] { posenc::llama::Model::parse(bytes, "test.bin"); });
}

TEST(LlamaLoad, ReadsTheHeader) {
  const posenc::llama::Config& c = model().config();
  EXPECT_EQ(c.dim, 64);
  EXPECT_EQ(c.hidden_dim, 172);
  EXPECT_EQ(c.max_seq_len, 512);
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.layers, 5);
  EXPECT_EQ(c.heads, 8);
  EXPECT_EQ(c.kv_heads, 4);
  EXPECT_TRUE(c.tied_output);
}

TEST(LlamaLoad, RefusesATruncatedCopy) {
  const auto bytes = read_bytes(kModel);
  const auto dir =
      std::filesystem::temp_directory_path() / ("posenc_llama_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const auto path = (dir / "truncated.bin").string();
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size() - 1000));
  try {
    posenc::llama::Model::load(path);
    ADD_FAILURE() << "a truncated file loaded";
  } catch (const posenc::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find(path), std::string::npos) << m;
    EXPECT_NE(m.find("byte 6657"), std::string::npos) << m;  // where the weights start
    EXPECT_NE(m.find("1040128 bytes"), std::string::npos) << m;
    EXPECT_NE(m.find("1039128 bytes are left (truncated?)"), std::string::npos) << m;
  }
  std::filesystem::remove_all(dir);
}

TEST(LlamaLoad, NamesTheFieldThatIsWrong) {
  const auto good = read_bytes(kModel);
  auto b = good;
  b[0] = 3;
  EXPECT_NE(load_error(b).find("byte 0: format version (3) must be 1 (float32 weights) or 2"),
            std::string::npos)
      << load_error(b);
  b = good;
  b[9] = 'b';  // "llamb"
  EXPECT_NE(load_error(b).find("model type (\"llamb\") must be \"llama\""), std::string::npos)
      << load_error(b);
  b = good;
  b[30] = 7;  // query heads 8 -> 7 (the i32 at byte 30)
  EXPECT_NE(load_error(b).find("hidden size (64) must be divisible by the query heads (7)"),
            std::string::npos)
      << load_error(b);
  b = good;
  b[34] = 3;  // key/value heads 4 -> 3
  EXPECT_NE(load_error(b).find("query heads (8) must be divisible by the key/value heads (3)"),
            std::string::npos)
      << load_error(b);
  b.assign(good.begin(), good.begin() + 3000);  // ends inside the vocabulary
  EXPECT_NE(load_error(b).find("vocabulary piece"), std::string::npos) << load_error(b);
  EXPECT_NE(load_error(b).find("the file ends at byte 3000"), std::string::npos) << load_error(b);
  b = good;
  b.push_back(0);
  EXPECT_NE(load_error(b).find("1040129 bytes are left"), std::string::npos) << load_error(b);
  b = good;
  b[256 + 7] = 0x80;  // the length of piece 0 (bytes 260..263) negative
  EXPECT_NE(load_error(b).find("byte 260: vocabulary piece 0 of 512: length"), std::string::npos)
      << load_error(b);
  b.assign(good.begin(), good.begin() + 3);
  EXPECT_NE(load_error(b).find("byte 1: model type length needs 4 bytes"), std::string::npos)
      << load_error(b);
}

TEST(LlamaSession, RefusesOverflowAndBadTokens) {
  posenc::llama::Session s(model(), {.rope = model().rope_spec("none"), .capacity = 4});
  std::vector<float> logits(5 * 512);
  const std::vector<std::int32_t> five{1, 2, 3, 4, 5};
  EXPECT_THROW(s.forward(five, logits), posenc::Error);
  const std::vector<std::int32_t> bad{1, 512};
  EXPECT_THROW(s.forward(bad, logits), posenc::Error);
}

}  // namespace
