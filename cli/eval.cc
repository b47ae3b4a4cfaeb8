// `posenc eval --model M --text T`: perplexity of a Llama model over a text for every (RoPE
// scaling method, context), by the protocol of posenc/llama/perplexity.h (docs/design.md §8).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <limits>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "method_param_flags.h"
#include "model_rope_sidecar.h"
#include "options.h"
#include "output_file.h"
#include "posenc/core/error.h"
#include "posenc/core/method_params.h"
#include "posenc/llama/llama.h"
#include "posenc/llama/perplexity.h"
#include "posenc/report/figures.h"
#include "report/encoding_json.h"

namespace posenc::cli {
namespace {

struct EvalOptions {
  std::string model;
  std::string text;
  std::vector<std::int64_t> ctx{512, 1024, 2048, 4096, 8192};
  std::vector<std::string> methods{"none",       "linear",  "ntk",          "yarn",
                                   "yarn-paper", "dynamic", "dynamic-yarn", "llama3"};
  std::optional<double> factor;
  MethodParams params;  // --attention-factor, --beta-fast, ... (method_param_flags.h)
  std::int64_t max_tokens = 131072;
  std::int64_t stride = 0;
  std::int64_t step = 64;
  int threads = 1;
  bool json = false;
  std::string output;
  CLI::Option* step_option = nullptr;
  CLI::Option* method_option = nullptr;
};

// An option the chosen methods do not read changes nothing: refuse it, naming the methods.
void refuse_unread(const EvalOptions& o, const llama::Model& model) {
  std::string no_factor;
  bool any_dynamic = false;
  for (const std::string& m : o.methods) {
    const RopeSpec spec = model.rope_spec(m, 1.0);
    // none has no factor; dynamic-yarn derives its own, max(1, seq_len / L), at every step.
    if (!method_info(spec.method).reads_param(kParamFactor))
      no_factor += (no_factor.empty() ? "" : ", ") + m;
    any_dynamic = any_dynamic || depends_on_length(spec);
  }
  if (o.factor && !no_factor.empty()) {
    throw Error(fmt::format(
        "--factor ({}) has no effect on --method {} (it has no factor, or derives its own): "
        "leave those out of --method, or drop --factor",
        *o.factor, no_factor));
  }
  for (const MethodParamInfo& info : method_param_table()) {
    if (!o.params.has(info)) continue;
    std::string unread;
    for (const std::string& m : o.methods) {
      if (!method_reads(model.rope_spec(m, 1.0), info.param))
        unread += (unread.empty() ? "" : ", ") + m;
    }
    if (!unread.empty()) {
      throw Error(fmt::format(
          "{} ({}) applies to {}, not to --method {}: leave those out of --method, or drop {}",
          info.flag, o.params.text(info), methods_reading(info.param), unread, info.flag));
    }
  }
  if (o.step_option && o.step_option->count() > 0 && !any_dynamic) {
    throw Error(fmt::format(
        "--step ({}) has no effect: none of --method ({}) recomputes its frequencies as the "
        "sequence grows ({} do)",
        o.step, fmt::join(o.methods, ","), methods_with(&MethodInfo::depends_on_seq_len)));
  }
}

// {"beta_fast": 16, ...}: the parameters set (by flags or the sidecar), the others absent.
nlohmann::json method_params_json(const MethodParams& p) {
  nlohmann::json j = nlohmann::json::object();
  for (const MethodParamInfo& info : method_param_table()) {
    if (!p.has(info)) continue;
    j[std::string(info.key)] =
        info.number ? nlohmann::json(*(p.*info.number)) : nlohmann::json(*p.truncate);
  }
  return j;
}

struct Cell {
  std::string method;
  std::int64_t ctx;
  double factor;
  llama::PerplexityResult result;
};

// Errors of a file option name the option: "--text: cannot read DIR: Is a directory".
template <typename F>
auto with_option(const char* option, F&& read) {
  try {
    return read();
  } catch (const Error& e) {
    throw Error(std::string(option) + ": " + e.what());
  }
}

// "nan", "inf", "1.234": a perplexity that is not finite shows as such, not as "-" (and a NaN's
// sign bit, which printf shows as "-nan", means nothing).
std::string non_finite_text(double v) { return std::isnan(v) ? "nan" : v > 0 ? "inf" : "-inf"; }
std::string perplexity_text(double p, int decimals = 3) {
  return std::isfinite(p) ? fmt::format("{:.{}f}", p, decimals) : non_finite_text(p);
}

std::string non_finite_reason(const llama::PerplexityResult& r) {
  return fmt::format(
      "perplexity is {} (the summed negative log-likelihood of {} tokens is {}): the logits were "
      "not "
      "finite, e.g. float32 overflow from an extreme --attention-factor",
      non_finite_text(r.perplexity), r.tokens_scored, perplexity_text(r.nll_sum));
}

// Refuses, before any forward pass, a run that would score nothing: the numbers say why.
void check_enough_tokens(const EvalOptions& o, const std::vector<std::int32_t>& tokens) {
  const auto n = static_cast<std::int64_t>(tokens.size());
  if (n == 0) throw Error("--text: " + o.text + " has no tokens (an empty text): nothing to score");
  if (o.stride != 0) {
    if (o.max_tokens < 1)
      throw Error("--max-tokens (" + std::to_string(o.max_tokens) + ") must be at least 1");
    return;
  }
  const std::int64_t ctx = *std::max_element(o.ctx.begin(), o.ctx.end());
  if (n < ctx) {
    throw Error("--ctx " + std::to_string(ctx) + " needs " + std::to_string(ctx) +
                " tokens for one window, but the text (" + o.text + ") has " + std::to_string(n) +
                " tokens");
  }
  if (o.max_tokens < ctx) {
    throw Error("--max-tokens (" + std::to_string(o.max_tokens) +
                ") must be at least the largest --ctx (" + std::to_string(ctx) +
                "): one window is ctx tokens");
  }
}

std::string protocol_line(const EvalOptions& o, std::int64_t trained) {
  std::string s =
      o.stride == 0
          ? fmt::format(
                "non-overlapping windows of ctx tokens (at most {} tokens), first token BOS, "
                "positions ctx/2 .. ctx-1 scored",
                o.max_tokens)
          : fmt::format(
                "sliding window as YaRN's perplexity.py: BOS + ctx-1 tokens, stride {}, over the "
                "first {} "
                "tokens, each scored once",
                o.stride, o.max_tokens);
  s += o.factor ? fmt::format("; s = {}", *o.factor)
                : fmt::format("; s = max(1, ctx / {})", trained);
  if (!o.params.params_empty()) s += "; " + o.params.param_flags();
  return s;
}

std::string figure(const EvalOptions& o, const std::vector<Cell>& cells, std::int64_t trained) {
  std::vector<figures::PerplexityPoint> points;
  for (const Cell& c : cells) points.push_back({c.method, c.ctx, c.result.perplexity});
  return figures::perplexity_figure(fmt::format("{}: perplexity on {} against context",
                                                std::filesystem::path(o.model).stem().string(),
                                                std::filesystem::path(o.text).filename().string()),
                                    protocol_line(o, trained), o.methods, o.ctx, points, trained);
}

void run_eval(const EvalOptions& given) {
  EvalOptions o = given;
  // A fine-tuned model's RoPE (M.json beside M.bin) stands in for --method, --factor and the
  // method parameters unless --method is given; --factor and each parameter flag override it.
  std::optional<RopeSidecar> sidecar;
  if (o.method_option->count() == 0) {
    sidecar = with_option("--model", [&] { return read_rope_sidecar(o.model); });
    if (sidecar) {
      o.methods = {sidecar->method};
      if (!o.factor) o.factor = sidecar->factor;
      MethodParams flags = o.params;
      o.params = sidecar->params;
      o.params.override_params(flags);
      std::cerr << sidecar_note(*sidecar, "eval");
    }
  }
  if (o.factor && !(*o.factor > 0))
    throw Error(fmt::format("--factor ({}) must be positive", *o.factor));
  // stdout carries the table (or its JSON): the figure needs a file of its own.
  if (o.output == "-")
    throw Error(
        "-o (-): eval prints its table on stdout; give the figure a file path (e.g. -o ppl.svg)");
  warn_oversubscribed("--threads", o.threads);
  const llama::Model model = with_option("--model", [&] { return llama::Model::load(o.model); });
  const std::int64_t trained = model.config().max_seq_len;
  if (sidecar)  // its own settings, named as its keys, before the flags change them
    with_option("--model", [&] { return sidecar_rope_spec(*sidecar, model.config()); });
  for (const std::string& m : o.methods)
    model.rope_spec(m, 1.0);  // unknown names fail before any work
  refuse_unread(o, model);
  // Each cell's RoPE: s = --factor, else max(1, ctx / L); then the method parameters.
  const auto cell_spec = [&](const std::string& m, std::int64_t c) {
    const double s =
        o.factor ? *o.factor : std::max(1.0, static_cast<double>(c) / static_cast<double>(trained));
    RopeSpec spec = model.rope_spec(m, s);
    apply_method_params(spec, o.params, ParamNames::kFlags, "--method " + m);
    return std::pair{spec, s};
  };
  for (const std::string& m : o.methods) {
    for (std::int64_t c : o.ctx) cell_spec(m, c);  // bad parameters fail before any work
  }
  for (std::int64_t c : o.ctx) {
    if (c < 2) throw Error("--ctx (" + std::to_string(c) + ") must be at least 2");
    if (c > llama::max_capacity(model.config())) {
      throw Error("--ctx (" + std::to_string(c) + ") must be at most " +
                  std::to_string(llama::max_capacity(model.config())) +
                  " for this model (its KV cache is limited to " +
                  std::to_string(llama::kMaxKvCacheBytes >> 30) + " GiB)");
    }
  }

  const std::string text = with_option("--text", [&] { return llama::read_text(o.text); });
  auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::int32_t> tokens = model.tokenizer().encode(text);
  const double tokenize_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::cerr << fmt::format("eval: {} bytes -> {} tokens in {:.2f} s; {} threads\n", text.size(),
                           tokens.size(), tokenize_s, o.threads);
  check_enough_tokens(o, tokens);

  const bool tty = isatty(STDERR_FILENO) != 0;
  std::vector<Cell> cells;
  std::int64_t total_run = 0;
  double total_s = 0;
  for (const std::string& m : o.methods) {
    for (std::int64_t c : o.ctx) {
      const auto [spec, s] = cell_spec(m, c);
      llama::PerplexityOptions po;
      po.ctx = c;
      po.max_tokens = o.max_tokens;
      po.stride = o.stride;
      po.threads = o.threads;
      po.step = o.step;
      if (tty) {
        po.progress = [&](std::int64_t done, std::int64_t all) {
          std::cerr << fmt::format("\reval: {} ctx {}: window {}/{}", m, c, done, all)
                    << std::flush;
        };
      }
      Cell cell{m, c, s, llama::perplexity(model, spec, tokens, po)};
      const llama::PerplexityResult& r = cell.result;
      total_run += r.tokens_run;
      total_s += r.seconds;
      std::cerr << fmt::format(
          "{}eval: {:<12} ctx {:>5} s {:<6g} ppl {:>10}  {} windows, {} tokens in {:.1f} s "
          "({:.0f} tokens/s){}\n",
          tty ? "\r" : "", m, c, s, perplexity_text(r.perplexity, 4), r.windows, r.tokens_run,
          r.seconds, r.seconds > 0 ? static_cast<double>(r.tokens_run) / r.seconds : 0.0,
          r.rerotations ? fmt::format(", {} cache re-rotations", r.rerotations) : "");
      cells.push_back(std::move(cell));
    }
  }
  std::cerr << fmt::format("eval: {} tokens through the model in {:.1f} s: {:.0f} tokens/s\n",
                           total_run, total_s,
                           total_s > 0 ? static_cast<double>(total_run) / total_s : 0.0);

  if (!o.output.empty()) write_output_file("-o", o.output, figure(o, cells, trained));

  if (o.json) {
    nlohmann::json results = nlohmann::json::array();
    nlohmann::json table = nlohmann::json::object();
    for (const Cell& c : cells) {
      const llama::PerplexityResult& r = c.result;
      results.push_back(
          {{"method", c.method},
           {"ctx", c.ctx},
           {"factor", c.factor},
           {"windows", r.windows},
           {"tokens_run", r.tokens_run},
           {"tokens_scored", r.tokens_scored},
           {"nll", detail::number_or_null(
                       r.tokens_scored ? r.nll_sum / static_cast<double>(r.tokens_scored) : NAN)},
           {"perplexity", detail::number_or_null(r.perplexity)},
           {"reason", std::isfinite(r.perplexity) ? nlohmann::json(nullptr)
                                                  : nlohmann::json(non_finite_reason(r))},
           {"seconds", r.seconds},
           {"tokens_per_second",
            r.seconds > 0 ? static_cast<double>(r.tokens_run) / r.seconds : 0.0},
           {"rerotations", r.rerotations}});
      table[c.method][std::to_string(c.ctx)] = detail::number_or_null(r.perplexity);
    }
    nlohmann::json j = {
        {"model", o.model},
        {"text", o.text},
        {"text_bytes", text.size()},
        {"text_tokens", tokens.size()},
        {"trained_context", trained},
        {"protocol", o.stride == 0 ? "windows" : "sliding"},
        {"max_tokens", o.max_tokens},
        {"stride", o.stride},
        {"step", o.step},
        {"threads", o.threads},
        {"factor",
         o.factor ? nlohmann::json(*o.factor) : nlohmann::json("max(1, ctx / trained_context)")},
        {"attention_factor", o.params.attention_factor ? nlohmann::json(*o.params.attention_factor)
                                                       : nlohmann::json(nullptr)},
        {"method_params", method_params_json(o.params)},
        {"contexts", o.ctx},
        {"methods", o.methods},
        {"results", results},
        {"table", table}};
    std::cout << detail::json_text(j) << "\n";
  } else {
    fmt::print("perplexity of {} on {} ({} tokens)\n{}\n\n", o.model, o.text, tokens.size(),
               protocol_line(o, trained));
    fmt::print("{:<14}", "method");
    for (std::int64_t c : o.ctx) fmt::print("{:>11}", c);
    fmt::print("\n");
    for (const std::string& m : o.methods) {
      fmt::print("{:<14}", m);
      for (const Cell& c : cells) {
        if (c.method == m) fmt::print("{:>11}", perplexity_text(c.result.perplexity));
      }
      fmt::print("\n");
    }
  }
  std::cout << std::flush;
  std::string failed;
  for (const Cell& c : cells) {
    if (!std::isfinite(c.result.perplexity)) {
      failed += fmt::format("{}  {} at ctx {} (s = {:g}): {}", failed.empty() ? "" : "\n", c.method,
                            c.ctx, c.factor, non_finite_reason(c.result));
    }
  }
  if (!failed.empty()) throw Error("eval: no finite perplexity for\n" + failed);
}

}  // namespace

void add_eval(CLI::App& app) {
  auto o = std::make_shared<EvalOptions>();
  o->threads = std::min(hardware_threads(), kMaxThreads);
  CLI::App* cmd = app.add_subcommand("eval",
                                     "Perplexity of a Llama model file (llama2.ts v1 format, e.g. "
                                     "stories260K) over a text, for every RoPE scaling "
                                     "method and context: docs/design.md §8 (non-overlapping "
                                     "windows, first token BOS, second half scored), or a "
                                     "sliding window with --stride. The factor is s = max(1, ctx / "
                                     "trained context) unless --factor is given. "
                                     "Progress on stderr; a table (or --json) on stdout; -o writes "
                                     "perplexity against context as SVG.");
  constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  add_text(cmd, "--model", o->model, "The model file (v1 format)", "PATH")->required();
  add_text(cmd, "--text", o->text, "The text (UTF-8), tokenized whole, as it is", "PATH")
      ->required();
  add_integers(cmd, "--ctx", o->ctx, std::int64_t{2}, kMax,
               "Contexts, e.g. 512,1024,2048; each at most the KV cache's positions (4 GiB: "
               "3355443 for stories260K)")
      ->capture_default_str();
  o->method_option =
      add_texts(cmd, "--method", o->methods,
                "Methods: none, linear, ntk, yarn, yarn-paper, dynamic, dynamic-yarn, llama3 "
                "(default: the method of M.json beside the model when there is one, with its "
                "factor; else all of these)")
          ->capture_default_str();
  add_number(cmd, "--factor", o->factor,
             "Scaling factor s for every context (default: max(1, ctx / trained context)); not "
             "with none or "
             "dynamic-yarn, which have no factor or derive their own");
  add_method_param_flags(cmd, o->params, kMethodParamGroup, false);
  add_integer(cmd, "--max-tokens", o->max_tokens, std::int64_t{0}, kMax,
              "Tokens of the text used at most")
      ->capture_default_str();
  add_integer(
      cmd, "--stride", o->stride, std::int64_t{0}, kMax,
      "Sliding-window evaluation as YaRN's eval/perplexity.py (BOS + ctx-1 tokens per window, the "
      "last S scored) with this stride S (0: non-overlapping windows)")
      ->capture_default_str();
  o->step_option =
      add_integer(cmd, "--step", o->step, std::int64_t{1}, kMax,
                  "dynamic methods: tokens per forward step; they recompute their frequencies (and "
                  "re-rotate the cached keys) once per step, for the length at its end")
          ->capture_default_str();
  add_threads(cmd, o->threads, "Threads of the forward pass");
  cmd->add_flag("--json", o->json, "Print one JSON object instead of the table");
  add_text(cmd, "-o,--output", o->output,
           "Write perplexity against context (one line per method) as SVG");
  cmd->callback([o] { run_eval(*o); });
}

}  // namespace posenc::cli
