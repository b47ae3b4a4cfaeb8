// `posenc apply`: rotate q (and k) stored as .npy files with a model's RoPE, so a result can be
// compared with another engine's tensor for tensor.
#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "encoding_flags.h"
#include "options.h"
#include "output_file.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/threads.h"
#include "posenc/io/npy.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/table.h"
#include "posenc/rope/targets.h"
#include "report/encoding_json.h"

namespace posenc::cli {
namespace {

// --table holds cos and sin (2 x float32) per pair for every position up to the largest: refuse
// one above 4 GiB, where computing rows on the fly is the better choice anyway.
constexpr std::int64_t kMaxTableBytes = std::int64_t{1} << 32;

struct ApplyOptions {
  std::string q;
  std::string k;
  std::string q_out;
  std::string k_out;
  std::string positions;
  std::optional<std::int64_t> positions_range;
  std::optional<std::string> numerics;
  std::optional<std::int64_t> seq_len;
  bool bf16 = false;
  bool inverse = false;
  bool table = false;
  bool json = false;
  int threads = 1;
  EncodingFlags encoding;
};

std::string shape_str(const std::vector<std::int64_t>& shape) {
  return "[" + fmt::format("{}", fmt::join(shape, ", ")) + "]";
}

void warn(const std::string& message) { std::cerr << "posenc: warning: " << message << "\n"; }

struct Tensor {
  std::string path;
  NpyArray array;
  DType dtype = DType::kF32;

  std::int64_t tokens() const { return array.shape[0]; }
  std::int64_t heads() const { return array.shape[1]; }
  std::int64_t head_dim() const { return array.shape[2]; }
  TensorView view() {
    return TensorView::contiguous(array.data.data(), dtype, tokens(), heads(), head_dim());
  }
};

Tensor load_tensor(const std::string& flag, const std::string& path, bool bf16,
                   std::vector<std::string>& warnings) {
  Tensor t{path, read_npy_flag(flag, path), DType::kF32};
  warnings.insert(warnings.end(), t.array.warnings.begin(), t.array.warnings.end());
  const std::string& descr = t.array.descr;
  if (bf16 && descr != "<u2") {
    throw Error("--bf16: " + flag + " (" + path + ") holds '" + descr +
                "', not bfloat16 bits stored as '<u2'");
  }
  if (descr == "<f4") {
    t.dtype = DType::kF32;
  } else if (descr == "<f2") {
    t.dtype = DType::kF16;
  } else if (descr == "<u2" && bf16) {
    t.dtype = DType::kBF16;
  } else {
    throw Error(flag + ": " + path + " holds '" + descr + "'" +
                (descr == "<u2" ? " (uint16); if these are bfloat16 bits, pass --bf16" : "") +
                "; expected float32 '<f4', float16 '<f2', or bfloat16 bits '<u2' with --bf16");
  }
  if (t.array.shape.size() != 3) {
    throw Error(flag + ": " + path + " has shape " + shape_str(t.array.shape) +
                "; expected [tokens, heads, head_dim]");
  }
  if (t.heads() <= 0 || t.head_dim() <= 0) {
    throw Error(flag + ": " + path + " has shape " + shape_str(t.array.shape) +
                "; heads and head_dim must be positive");
  }
  return t;
}

struct PositionList {
  std::vector<std::int32_t> i32;
  std::vector<std::int64_t> i64;
  bool is32 = false;
  std::string source;
  std::int64_t min = 0;
  std::int64_t max = -1;  // -1 when there are none
  std::int64_t axes = 1;  // a [axes, tokens] file (multi-axis RoPE), axis-major
  bool range = false;     // from --positions-range

  Positions view() const {
    if (is32) return std::span<const std::int32_t>(i32);
    return std::span<const std::int64_t>(i64);
  }
};

PositionList load_positions(const ApplyOptions& o, const Tensor& q) {
  if (o.positions.empty() == !o.positions_range.has_value()) {
    throw Error(o.positions.empty()
                    ? "positions are required: give --positions FILE.npy or --positions-range START"
                    : "give either --positions (\"" + o.positions + "\") or --positions-range (" +
                          std::to_string(*o.positions_range) + "), not both");
  }
  PositionList p;
  const std::int64_t tokens = q.tokens();
  if (o.positions_range) {
    const std::int64_t start = *o.positions_range;
    if (tokens > 0 && start > std::numeric_limits<std::int64_t>::max() - (tokens - 1)) {
      throw Error("--positions-range (" + std::to_string(start) + ") + " + std::to_string(tokens) +
                  " tokens overflows int64");
    }
    p.i64.resize(static_cast<std::size_t>(tokens));
    for (std::int64_t t = 0; t < tokens; ++t) p.i64[static_cast<std::size_t>(t)] = start + t;
    p.source = fmt::format("--positions-range {}", start);
    p.range = true;
  } else {
    NpyArray a = read_npy_flag("--positions", o.positions);
    if ((a.descr != "<i4" && a.descr != "<i8") || a.shape.empty() || a.shape.size() > 2 ||
        (a.shape.size() == 2 && (a.shape[0] < 1 || a.shape[0] > 4))) {
      throw Error("--positions: " + o.positions + " holds '" + a.descr + "' of shape " +
                  shape_str(a.shape) +
                  "; expected int32 '<i4' or int64 '<i8' of shape [tokens], or [axes, tokens] "
                  "(1 to 4 axes) for multi-axis RoPE");
    }
    if (a.shape.back() != tokens) {
      throw Error("--positions: " + o.positions + " has " + std::to_string(a.shape.back()) +
                  " positions per axis, but --q (" + q.path + ") has " + std::to_string(tokens) +
                  " tokens");
    }
    p.axes = a.shape.size() == 2 ? a.shape[0] : 1;
    const auto count = static_cast<std::size_t>(p.axes * tokens);
    p.is32 = a.descr == "<i4";
    if (p.is32) {
      p.i32.resize(count);
      std::memcpy(p.i32.data(), a.data.data(), a.data.size());
    } else {
      p.i64.resize(count);
      std::memcpy(p.i64.data(), a.data.data(), a.data.size());
    }
    p.source = o.positions;
  }
  const Positions view = p.view();
  for (std::int64_t t = 0; t < p.axes * tokens; ++t) {
    const std::int64_t v = position_at(view, t);
    p.min = t == 0 ? v : std::min(p.min, v);
    p.max = t == 0 ? v : std::max(p.max, v);
  }
  return p;
}

// Positions for the encoding's axis count: a --positions-range is text (every axis the same);
// a file must have the encoding's [axes, tokens].
void fit_axes(PositionList& p, const RopeSpec& spec, const std::string& source,
              std::int64_t tokens) {
  const std::int64_t axes = axis_count(spec);
  if (p.axes == axes) return;
  if (p.range && p.axes == 1) {
    const std::vector<std::int64_t> text = p.i64;
    for (std::int64_t a = 1; a < axes; ++a) p.i64.insert(p.i64.end(), text.begin(), text.end());
    p.axes = axes;
    return;
  }
  throw Error(fmt::format(
      "--positions: {} holds {} {} of {} tokens, but the encoding ({}) reads {} {} ({} axis "
      "map){}",
      p.source, p.axes, p.axes == 1 ? "axis" : "axes", tokens, source, axes,
      axes == 1 ? "axis" : "axes", axis_rule_name(spec.axis_map.rule),
      axes > 1 ? fmt::format(": give [{}, {}] positions, axis-major", axes, tokens) : ""));
}

// The encoding: ggml_rope_ext parameters, or a spec from the model and the flags.
Frequencies resolve(const ApplyOptions& o, std::int64_t head_dim, const PositionList& pos,
                    std::vector<std::string>& warnings, std::string& source) {
  if (uses_ggml_params(o.encoding)) {
    if (o.numerics && *o.numerics != "ggml") {
      throw Error("--numerics (\"" + *o.numerics + "\") conflicts with ggml_rope_ext parameters (" +
                  given_names(o.encoding.ggml_options) + "), which compute in ggml numerics");
    }
    if (o.seq_len) {
      throw Error(
          "--seq-len (" + std::to_string(*o.seq_len) +
          ") has no effect with ggml_rope_ext parameters: their frequencies do not depend on it");
    }
    const GgmlRopeParams params = ggml_params_from_flags(o.encoding, head_dim);
    for (const std::string& w : validate(params)) warnings.push_back(w);
    Frequencies f = frequencies_from_ggml(params);
    f.spec.head_dim = head_dim;  // ggml rotates the first n_dims dims of each head, as rotary_dim
    source = ggml_is_multi(params.mode) ? "ggml_rope_multi parameters" : "ggml_rope_ext parameters";
    return f;
  }
  const RopeSpec spec = spec_from_flags(o.encoding, head_dim, warnings, source);
  if (spec.head_dim != head_dim) {
    throw Error("--q: " + o.q + " has head_dim " + std::to_string(head_dim) +
                ", but the encoding (" + source + ") has head_dim " +
                std::to_string(spec.head_dim));
  }
  const Numerics numerics = parse_numerics(o.numerics.value_or("precise"), "--numerics");
  // transformers' forward pass derives the length from position_ids: max(position) + 1.
  std::int64_t natural = 0;
  if (pos.max >= 0)
    natural = pos.max == std::numeric_limits<std::int64_t>::max() ? pos.max : pos.max + 1;
  if (o.seq_len && !depends_on_length(spec)) {
    throw Error(fmt::format(
        "--seq-len ({}) has no effect: rope_type {} (from {}) does not depend on the sequence "
        "length (only {} do)",
        *o.seq_len, method_name(spec), source, methods_with(&MethodInfo::depends_on_seq_len)));
  }
  const std::int64_t seq_len = o.seq_len.value_or(natural);
  for (const std::string& w : validate(spec)) {
    if (std::find(warnings.begin(), warnings.end(), w) == warnings.end()) warnings.push_back(w);
  }
  if (o.seq_len && seq_len < natural && depends_on_length(spec)) {
    warnings.push_back(
        fmt::format("--seq-len ({}) is below the largest position + 1 ({}), which transformers "
                    "would use for {}",
                    seq_len, natural, method_name(spec)));
  }
  return compute_frequencies(spec, numerics, seq_len);
}

std::optional<CosSinTable> build_table(const ApplyOptions& o, const Frequencies& f,
                                       const PositionList& pos) {
  if (!o.table) return std::nullopt;
  const std::int64_t rows = pos.max < 0 ? 0 : pos.max;  // rows [0, max + 1), checked before the + 1
  const std::int64_t row_bytes = std::max<std::int64_t>(1, f.pair_count()) * 2 * 4;
  if (rows >= kMaxTableBytes / row_bytes) {
    throw Error(fmt::format(
        "--table: positions up to {} need a table of {:.3g} GiB (more than {} GiB); drop --table "
        "to compute each row on the fly",
        pos.max, static_cast<double>(rows) * static_cast<double>(row_bytes) / 0x1p30,
        kMaxTableBytes >> 30));
  }
  return CosSinTable(f, pos.max < 0 ? 0 : pos.max + 1);
}

nlohmann::json tensor_json(const Tensor& t, const std::string& out) {
  return {{"input", t.path},
          {"output", out},
          {"shape", t.array.shape},
          {"dtype", std::string(dtype_name(t.dtype))}};
}

void run_apply(const ApplyOptions& o) {
  if (o.k.empty() != o.k_out.empty()) {
    throw Error(o.k.empty()
                    ? "--k-out (\"" + o.k_out + "\") needs --k, the keys to rotate"
                    : "--k (\"" + o.k + "\") needs --k-out, where to write the rotated keys");
  }
  if (!o.k_out.empty()) {
    std::error_code ec_q, ec_k;
    const auto q_path = std::filesystem::weakly_canonical(o.q_out, ec_q);
    const auto k_path = std::filesystem::weakly_canonical(o.k_out, ec_k);
    if (!ec_q && !ec_k && q_path == k_path) {
      throw Error("--k-out (\"" + o.k_out + "\") and -o (\"" + o.q_out + "\") name the same file");
    }
  }
  warn_oversubscribed("--threads", o.threads);
  std::vector<std::string> warnings;
  Tensor q = load_tensor("--q", o.q, o.bf16, warnings);
  std::optional<Tensor> k;
  if (!o.k.empty()) {
    k = load_tensor("--k", o.k, o.bf16, warnings);
    if (k->tokens() != q.tokens() || k->head_dim() != q.head_dim() || k->dtype != q.dtype) {
      throw Error("--k: " + o.k + " is " + shape_str(k->array.shape) + " " +
                  std::string(dtype_name(k->dtype)) +
                  "; it must have --q's tokens, head_dim and dtype (" + shape_str(q.array.shape) +
                  " " + std::string(dtype_name(q.dtype)) + "; heads may differ)");
    }
  }
  PositionList pos = load_positions(o, q);
  std::string source;
  const Frequencies f = resolve(o, q.head_dim(), pos, warnings, source);
  fit_axes(pos, f.spec, source, q.tokens());
  for (const std::string& w : warnings) warn(w);
  const std::optional<CosSinTable> table = build_table(o, f, pos);

  RopeArgs args;
  args.q = q.view();
  if (k) args.k = k->view();
  args.positions = pos.view();
  args.direction = o.inverse ? Direction::kInverse : Direction::kForward;
  args.table = table ? &*table : nullptr;
  args.threads = o.threads;
  const int threads_used = apply_rope(f, args);
  {
    // Both outputs or neither: a --k-out that cannot be written leaves -o untouched too.
    StagedOutputs out;
    for (const auto& [flag, path, t] :
         {std::tuple{"-o", &o.q_out, &q}, std::tuple{"--k-out", &o.k_out, k ? &*k : nullptr}}) {
      if (t == nullptr) continue;
      const std::vector<std::byte> bytes = npy_bytes(t->array.descr, t->array.shape, t->array.data);
      out.stage_text(flag, *path,
                     std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
    }
    out.commit();
  }

  const RopeSpec& s = f.spec;
  const std::string target = active_simd_target();
  if (o.json) {
    nlohmann::json j;
    j["q"] = tensor_json(q, o.q_out);
    j["k"] = k ? tensor_json(*k, o.k_out) : nlohmann::json(nullptr);
    j["dtype"] = std::string(dtype_name(q.dtype));
    j["positions"] = {
        {"source", pos.source}, {"count", q.tokens()}, {"min", pos.min}, {"max", pos.max}};
    j["encoding_source"] = source;
    detail::put_encoding_json(
        j, f);  // softmax_scale_multiplier is for the caller's attention, not applied here
    j["direction"] = o.inverse ? "inverse" : "forward";
    j["table_rows"] = table ? nlohmann::json(table->positions()) : nlohmann::json(nullptr);
    j["threads"] = threads_used;
    j["threads_requested"] = o.threads;
    j["target"] = target;
    j["warnings"] = warnings;
    std::cout << detail::json_text(j) << "\n";
    return;
  }
  fmt::print(stderr, "posenc: rotated q {} {}{} at {} positions {}..{} ({})\n",
             shape_str(q.array.shape), dtype_name(q.dtype),
             k ? fmt::format(" and k {} {}", shape_str(k->array.shape), dtype_name(k->dtype)) : "",
             q.tokens(), pos.min, pos.max, pos.source);
  fmt::print(
      stderr,
      "posenc: {} from {}, {} numerics{}, attention factor {:.10g}, {} dims {}..{} of {}, {}, {}, "
      "{} thread{}{}\n",
      method_name(s), source, numerics_name(f.numerics),
      f.numerics == Numerics::kGgml && f.ggml ? "" : fmt::format(", seq_len {}", f.seq_len),
      f.attention_factor, layout_name(s.layout), s.rotary_offset,
      s.rotary_offset + s.rotary_dim - 1, s.head_dim, o.inverse ? "inverse" : "forward", target,
      threads_used, threads_used == 1 ? "" : "s",
      table ? fmt::format(", table of {} rows", table->positions()) : "");
  fmt::print(stderr, "posenc: wrote {}{}\n", o.q_out, k ? ", " + o.k_out : "");
}

}  // namespace

void add_apply(CLI::App& app) {
  auto o = std::make_shared<ApplyOptions>();
  CLI::App* cmd = app.add_subcommand("apply",
                                     "Rotate queries (and keys) stored as .npy files, [tokens, "
                                     "heads, head_dim] float32, float16 or bfloat16 "
                                     "(raw '<u2' with --bf16), and write the results in the same "
                                     "dtype and shape. The encoding comes from a "
                                     "model (CONFIG, --config or --preset) with flags overriding "
                                     "its values, from the flags alone, or from "
                                     "ggml_rope_ext's own parameters.");
  add_text(cmd, "--q", o->q, "Queries .npy, [tokens, heads, head_dim]", "PATH")->required();
  add_text(cmd, "--k", o->k, "Keys .npy, [tokens, heads_k, head_dim] (heads_k may differ: GQA)",
           "PATH");
  add_text(cmd, "-o,--output", o->q_out, "Where to write the rotated queries (.npy)", "PATH")
      ->required();
  add_text(cmd, "--k-out", o->k_out, "Where to write the rotated keys (.npy)", "PATH");
  add_text(cmd, "--positions", o->positions,
           "int32 or int64 .npy of shape [tokens]: each token's position; [axes, tokens] "
           "(axis-major) for multi-axis RoPE, [4, tokens] (all t, then h, w, e) for ggml's "
           "--mode mrope / imrope / vision",
           "PATH");
  add_integer(cmd, "--positions-range", o->positions_range,
              std::numeric_limits<std::int64_t>::min(), std::numeric_limits<std::int64_t>::max(),
              "Positions START, START + 1, ... instead of a file (text tokens: every axis the "
              "same)");
  cmd->add_flag("--bf16", o->bf16, "The '<u2' inputs hold bfloat16 bits (outputs likewise)");
  add_text(
      cmd, "--numerics", o->numerics,
      "precise (float64, the default), hf (transformers' float32) or ggml (llama.cpp's CPU rope)");
  add_integer(
      cmd, "--seq-len", o->seq_len, std::int64_t{0}, std::numeric_limits<std::int64_t>::max(),
      "Sequence length for dynamic, dynamic-yarn and longrope (default: the largest position + 1, "
      "the length transformers' forward pass derives from position_ids)");
  cmd->add_flag("--inverse", o->inverse,
                "Rotate backwards (the transpose: undoes a forward rotation)");
  add_threads(cmd, o->threads, "Threads to use");
  cmd->add_flag(
      "--table", o->table,
      "Build a cos/sin table for positions [0, max + 1) first instead of computing rows on the fly "
      "(the results are identical)");
  cmd->add_flag("--json", o->json,
                "Print a JSON summary on stdout (shapes, dtype, numerics, rope_type, ...)");
  add_encoding_flags(cmd, o->encoding);
  cmd->footer(
      std::string("Progress and warnings go to stderr. POSENC_SIMD_TARGET=NAME picks the SIMD "
                  "target (posenc targets). ") +
      kSoftwarePrefetchSetting);
  cmd->callback([o] { run_apply(*o); });
}

}  // namespace posenc::cli
