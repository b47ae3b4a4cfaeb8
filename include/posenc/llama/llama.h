// posenc/llama/llama.h: a small Llama-2 forward pass, to measure RoPE scaling methods on a real
// model.
//
// It reads the "v1" binary format of llama2.ts (../shared/models/stories260K/README.md): a header,
// a sentencepiece-style BPE vocabulary, and float32 weights. The forward pass is the Llama 2
// architecture, in float32:
//
//   x = embed[token]
//   per layer:  h = rmsnorm(x) * w_att                     rmsnorm(x) = x / sqrt(mean(x^2) + 1e-5)
//               q, k, v = h Wq^T, h Wk^T, h Wv^T            k, v: kv_heads heads (grouped queries)
//               q, k = RoPE(q, k) at each token's position   posenc::apply_rope, this Session's
//                                                            Frequencies (interleaved pairs)
//               a = softmax(q k^T * m / sqrt(head_dim)) v    causal; m = softmax_scale_multiplier
//               x = x + a Wo^T
//               h = rmsnorm(x) * w_ffn
//               x = x + (silu(h Wgate^T) * (h Wup^T)) Wdown^T
//   logits = rmsnorm(x) * w_final  E^T                       E: the embedding (tied output)
//
// A Session holds one sequence's KV cache and runs tokens in steps. Methods whose frequencies
// depend on the sequence length (dynamic, dynamic-yarn, longrope) get new frequencies before
// each step of at most `step` tokens, computed for the length the sequence has at the end of
// that step; the keys already cached are re-rotated to them (R(new) R(old)^T, with
// posenc::rerotate_keys' rows and bits), never recomputed; consecutive steps whose frequencies are
// the same (every step up to L) run as one. Tokens run in batches of up to max(step, 256): the
// projections and the feed-forward block over the whole batch, RoPE, the re-rotation and
// attention step by step inside each layer (on several threads in one region per layer, by
// groups of kv heads, each thread running a group's steps in order), so the logits are those of
// the steps run one at a time, bit for bit. Static methods run in steps of max(step, 256) tokens and do not
// depend on how the tokens are split at all: on one SIMD target their logits are bit for bit the
// same whatever the steps, the calls to forward() (prefill or one token at a time) and the number
// of threads (every output element is computed by the same operations in the same order, only on
// a different thread or in a different kernel path). Targets differ in the last bits (fused
// multiply-add where the target has it).
//
// Example:
//   auto model = posenc::llama::Model::load("tinystories_260k_v1.bin");
//   auto ids = model.tokenizer().encode("Once upon a time");   // ▁Once ▁upon ▁a ▁time
//   posenc::llama::Session session(model,
//                                  {.rope = model.rope_spec("yarn", 4.0), .capacity = 2048});
//   std::vector<float> logits(model.config().vocab_size);
//   session.forward(ids, logits, ids.size() - 1);               // logits of the last token
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "posenc/core/defaults.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/numerics.h"
#include "posenc/core/spec.h"

namespace posenc::llama {

// The largest v1 model file Model::load reads: the file is read whole and its matrices copied
// once more to transpose them, so the peak is twice this. 8 GiB is 2^31 float32 parameters,
// 19x the largest tinyllamas checkpoint (stories110M, 438 MB).
inline constexpr std::uint64_t kMaxModelBytes = std::uint64_t{8} << 30;

// RMSNorm epsilon of Llama 2 (llama2.c `rmsnorm`, Hugging Face `rms_norm_eps` 1e-5).
inline constexpr float kRmsNormEps = 1e-5f;

struct Config {
  std::int64_t dim = 0;          // H, hidden size
  std::int64_t hidden_dim = 0;   // I, feed-forward size
  std::int64_t max_seq_len = 0;  // the context the model was trained with (L)
  std::int64_t vocab_size = 0;   // V
  std::int64_t layers = 0;
  std::int64_t heads = 0;        // query heads
  std::int64_t kv_heads = 0;     // key/value heads; heads % kv_heads == 0
  bool tied_output = true;       // the output matrix is the embedding
  bool float16_weights = false;  // format version 2: the file stores the weights as float16
  // The v1 format stores no base: llama2.c and the tinyllamas checkpoints use 10000.
  double rope_theta = kDefaultRopeTheta;

  std::int64_t head_dim() const { return dim / heads; }
  std::int64_t kv_dim() const { return kv_heads * head_dim(); }
};

// The sentencepiece-style BPE tokenizer stored in the model file (llama2.c `encode`).
//
// Encoding, exactly:
//   1. the text's bytes as they are (no Unicode normalisation, newlines kept), with every space
//      byte ' ' written as U+2581 "▁" (the vocabulary's space character; it has no piece with a
//      plain space) and one "▁" prepended when the text is not empty (the dummy prefix);
//   2. one symbol per UTF-8 code point: its piece if the vocabulary has one, else one byte-
//      fallback symbol <0xXX> per byte (a byte that is not part of a valid UTF-8 sequence counts
//      as a code point of its own);
//   3. repeatedly merge the adjacent pair of symbols whose concatenation is a piece with the
//      highest score, the leftmost such pair on ties, until no pair is a piece. Byte-fallback
//      symbols never merge, and merges only ever produce normal pieces (not <unk>, <s>, </s>
//      or <0xXX>).
// encode() does step 3 with a priority queue over a linked list, O(n log n); encode_plain() is
// the literal O(n^2) rescan of llama2.c, run between byte-fallback symbols (which never merge,
// so the segments evolve independently and the result is the same). Both give the same ids.
class Tokenizer {
 public:
  // pieces[i] and scores[i] of token id i. Throws Error when a byte-fallback piece <0x00> ..
  // <0xFF> or <s> is missing.
  Tokenizer(std::vector<std::string> pieces, std::vector<float> scores);

  std::vector<std::int32_t> encode(std::string_view text) const;
  std::vector<std::int32_t> encode_plain(std::string_view text) const;

  // The text of one token: "▁" becomes ' ', a byte piece <0xXX> its byte, <s> </s> <unk> "".
  std::string decode(std::int32_t id) const;
  std::string decode(std::span<const std::int32_t> ids) const;

  std::int32_t bos_id() const { return bos_; }
  std::int32_t eos_id() const { return eos_; }
  std::int64_t size() const { return static_cast<std::int64_t>(pieces_.size()); }
  const std::string& piece(std::int32_t id) const {
    return pieces_.at(static_cast<std::size_t>(id));
  }
  float score(std::int32_t id) const { return scores_.at(static_cast<std::size_t>(id)); }

 private:
  struct Symbol;
  struct StringHash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::vector<Symbol> initial_symbols(std::string_view text, std::string& work) const;
  std::int32_t merge_id(std::string_view text) const;  // -1 unless a mergeable piece

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::unordered_map<std::string, std::int32_t, StringHash, std::equal_to<>> ids_;
  std::vector<bool> mergeable_;
  std::int32_t byte_ids_[256] = {};
  std::int32_t bos_ = 1;
  std::int32_t eos_ = 2;
};

// Weights as the forward pass uses them: each matrix transposed to [in, out] (row-major), so
// that a row of the output is a sum over inputs of input[k] * row k, vectorised over outputs.
struct Weights {
  std::vector<float> embedding;               // [V, H] as in the file (rows are token vectors)
  std::vector<float> embedding_t;             // [H, V] the output matrix, transposed
  std::vector<float> attention_norm;          // [L, H]
  std::vector<float> wq_t, wk_t, wv_t, wo_t;  // [L, H, H], [L, H, KV], [L, H, KV], [L, H, H]
  std::vector<float> ffn_norm;                // [L, H]
  std::vector<float> gate_t, up_t, down_t;    // [L, H, I], [L, H, I], [L, I, H]
  std::vector<float> final_norm;              // [H]
};

class Model {
 public:
  // Reads and checks a v1 file. Throws Error naming the file, the byte offset and the field for
  // a file that cannot be read or is larger than kMaxModelBytes, a version other than 1 (float32
  // weights) or 2 (the same layout with float16 weights, widened on load) (saying what
  // the file is instead when it is a GGUF, .npy or JSON file; checked on the first bytes), a
  // model type other than "llama", sizes that do not fit together (hidden size not divisible by
  // the heads, heads not by the key/value heads, an odd head dim), a vocabulary that runs past
  // the end of the file, or weights that do not end exactly at it.
  static Model load(const std::string& path);

  // The same from bytes already in memory; `name` is used in messages.
  static Model parse(std::span<const unsigned char> bytes, const std::string& name);

  const Config& config() const { return config_; }
  const Tokenizer& tokenizer() const { return *tokenizer_; }
  const Weights& weights() const { return weights_; }

  // The RoPE the model was trained with, scaled by `method` ("none", "linear", "ntk", "yarn",
  // "yarn-paper", "dynamic", "dynamic-yarn", "llama3", ...; set_method's names) and factor s:
  // head_dim = rotary_dim = dim / heads, interleaved pairs, base rope_theta,
  // original_max_position_embeddings L = max_seq_len, and max_position_embeddings L (dynamic NTK
  // grows from L) for dynamic, else 0. Llama 3 keeps its default factors 1 and 4.
  RopeSpec rope_spec(std::string_view method = "none", double factor = 1.0) const;

 private:
  Config config_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  Weights weights_;
};

// Model::rope_spec for any model of this configuration (a model built elsewhere, e.g. in
// PyTorch by posenc.llama, gets the same RoPE as the file's).
RopeSpec rope_spec(const Config& config, std::string_view method = "none", double factor = 1.0);

// A Session's KV cache (float32 keys and values of every layer) is at most this large: 4 GiB is
// 3,355,443 positions of stories260K, 6500 times its trained context, and keeps a mistyped
// --tokens or --ctx an error instead of bad_alloc. A Session that decodes (forward() with at most
// 4 tokens) also keeps a copy of the keys in attention's blocks: half as much again.
inline constexpr std::uint64_t kMaxKvCacheBytes = std::uint64_t{4} << 30;
// A Session of a dynamic method also keeps its re-rotation rows for reuse across reset(), at most
// 64 MiB.
// And at most this many positions whatever the model (positions are int32 in the kernels).
inline constexpr std::int64_t kMaxSessionPositions = std::int64_t{1} << 30;

// Bytes of KV cache one position takes: 2 (keys, values) * layers * kv_dim * 4.
std::int64_t kv_cache_bytes_per_position(const Config& config);
// The largest SessionOptions::capacity for this model: min(kMaxSessionPositions,
// kMaxKvCacheBytes / kv_cache_bytes_per_position).
std::int64_t max_capacity(const Config& config);

struct SessionOptions {
  RopeSpec rope;  // see Model::rope_spec
  Numerics numerics = Numerics::kPrecise;
  std::int64_t capacity = 0;  // positions the KV cache holds
  int threads = 1;  // matmul and attention threads, [1, kMaxThreads] (pool, no start-up per call)
  std::int64_t step = 64;  // frequency update interval of dynamic methods, in tokens
};

// One sequence: the KV cache, the frequencies its keys are rotated with, scratch buffers.
class Session {
 public:
  // Throws Error when the spec does not fit the model (head_dim) or capacity is outside
  // [1, max_capacity(model.config())].
  Session(const Model& model, SessionOptions options);
  ~Session();
  Session(Session&&) noexcept;
  Session& operator=(Session&&) noexcept;

  // Tokens in the cache: the next token gets this position.
  std::int64_t size() const;
  // Empties the cache; the frequencies go back to those of the first step.
  void reset();

  // Runs `tokens` at positions size() .. size() + n - 1 and appends them to the cache. Writes the
  // logits of tokens first_logit .. n - 1 (row-major, vocab_size each) to `logits`, which must
  // hold (n - first_logit) * vocab_size floats; rows before first_logit are not computed.
  // Throws Error when the cache would overflow, a token id is out of range, or logits is short.
  void forward(std::span<const std::int32_t> tokens, std::span<float> logits,
               std::int64_t first_logit = 0);

  // The frequencies the cached keys are rotated with now.
  const Frequencies& frequencies() const;
  // How many times cached keys were re-rotated since the last reset.
  std::int64_t rerotations() const;

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Whether the method's frequencies depend on the sequence length, so that a Session updates them
// step by step: the registry's trait, declared in spec.h.
using posenc::depends_on_length;

}  // namespace posenc::llama
