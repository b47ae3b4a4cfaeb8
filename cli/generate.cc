// `posenc generate --model M --prompt TEXT`: continue a prompt with a Llama model, as a sanity
// check of the forward pass and of a scaling method (greedy unless --temperature is set).
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iostream>
#include <limits>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "commands.h"
#include "method_param_flags.h"
#include "model_rope_sidecar.h"
#include "options.h"
#include "posenc/core/error.h"
#include "posenc/llama/llama.h"
#include "posenc/llama/perplexity.h"

namespace posenc::cli {
namespace {

// CPU seconds of all the process's threads (the decoding loop's cost, whatever the load).
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

struct GenerateOptions {
  std::string model;
  std::string prompt;
  std::optional<std::string> prompt_file;
  std::optional<std::int64_t> prompt_tokens;
  std::int64_t tokens = 128;
  double temperature = 0.0;
  std::uint64_t seed = 1;
  std::string method = "none";
  std::optional<double> factor;
  MethodParams params;  // --attention-factor, --beta-fast, ... (method_param_flags.h)
  int threads = 1;
  CLI::Option* seed_option = nullptr;
  CLI::Option* prompt_option = nullptr;
  CLI::Option* method_option = nullptr;
};

std::int32_t pick(const std::vector<float>& logits, double temperature, std::mt19937_64& rng) {
  if (temperature <= 0.0) {
    return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) -
                                     logits.begin());
  }
  const float mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> p(logits.size());
  for (std::size_t i = 0; i < p.size(); ++i) p[i] = std::exp((logits[i] - mx) / temperature);
  std::discrete_distribution<std::int32_t> dist(p.begin(), p.end());
  return dist(rng);
}

void run_generate(const GenerateOptions& given) {
  GenerateOptions o = given;
  // A fine-tuned model's RoPE (M.json beside M.bin) unless --method is given (cli/eval.cc too).
  std::optional<RopeSidecar> sidecar;
  if (o.method_option->count() == 0) {
    try {
      sidecar = read_rope_sidecar(o.model);
    } catch (const Error& e) {
      throw Error(std::string("--model: ") + e.what());
    }
    if (sidecar) {
      o.method = sidecar->method;
      if (!o.factor) o.factor = sidecar->factor;
      MethodParams flags = o.params;  // each flag overrides the sidecar's setting
      o.params = sidecar->params;
      o.params.override_params(flags);
      std::cerr << sidecar_note(*sidecar, "generate");
    }
  }
  if (o.tokens < 0) throw Error("--tokens (" + std::to_string(o.tokens) + ") must not be negative");
  if (!(o.temperature >= 0.0))
    throw Error("--temperature (" + std::to_string(o.temperature) + ") must be >= 0");
  if (o.seed_option->count() > 0 && o.temperature == 0.0) {
    throw Error("--seed (" + std::to_string(o.seed) +
                ") has no effect: generation is greedy unless --temperature "
                "is above 0, and only sampling draws random numbers");
  }
  if (o.prompt_option->count() == 0 && !o.prompt_file)
    throw Error("generate needs a prompt: --prompt TEXT or --prompt-file PATH");
  warn_oversubscribed("--threads", o.threads);
  const llama::Model model = [&] {
    try {
      return llama::Model::load(o.model);
    } catch (const Error& e) {
      throw Error(std::string("--model: ") + e.what());
    }
  }();
  if (sidecar) {  // its own settings, named as its keys, before the flags change them
    try {
      sidecar_rope_spec(*sidecar, model.config());
    } catch (const Error& e) {
      throw Error(std::string("--model: ") + e.what());
    }
  }
  RopeSpec rope = model.rope_spec(o.method, o.factor.value_or(1.0));
  // none has no factor; dynamic-yarn derives its own, max(1, seq_len / L).
  if (o.factor && !method_reads(rope, kParamFactor)) {
    throw Error(
        fmt::format("--factor ({}) has no effect with --method {}: it reads no factor ({} do)",
                    *o.factor, o.method, methods_reading(kParamFactor)));
  }
  apply_method_params(rope, o.params, ParamNames::kFlags, "--method " + o.method);
  const llama::Tokenizer& tok = model.tokenizer();
  std::vector<std::int32_t> ids{tok.bos_id()};
  std::string prompt_text = o.prompt;
  if (o.prompt_file) {
    try {
      prompt_text = llama::read_text(*o.prompt_file);
    } catch (const Error& e) {
      throw Error(std::string("--prompt-file: ") + e.what());
    }
  }
  std::vector<std::int32_t> prompt = tok.encode(prompt_text);
  if (o.prompt_tokens) {
    if (*o.prompt_tokens > static_cast<std::int64_t>(prompt.size())) {
      throw Error(fmt::format("--prompt-tokens ({}) must be at most the prompt's {} tokens",
                              *o.prompt_tokens, prompt.size()));
    }
    prompt.resize(static_cast<std::size_t>(*o.prompt_tokens));
    prompt_text = tok.decode(prompt);
    if (!prompt_text.empty() && prompt_text[0] == ' ') prompt_text.erase(0, 1);  // dummy prefix
  }
  ids.insert(ids.end(), prompt.begin(), prompt.end());
  const std::int64_t positions = llama::max_capacity(model.config());
  if (o.tokens > positions - static_cast<std::int64_t>(ids.size())) {
    throw Error("--tokens (" + std::to_string(o.tokens) + ") must be at most " +
                std::to_string(positions - static_cast<std::int64_t>(ids.size())) +
                ": this model's KV cache holds " + std::to_string(positions) + " positions (" +
                std::to_string(llama::kMaxKvCacheBytes >> 30) + " GiB) and BOS + the prompt take " +
                std::to_string(ids.size()));
  }
  llama::Session session(model, {.rope = rope,
                                 .capacity = static_cast<std::int64_t>(ids.size()) + o.tokens,
                                 .threads = o.threads});
  std::vector<float> logits(static_cast<std::size_t>(model.config().vocab_size));
  std::mt19937_64 rng(o.seed);
  const auto t0 = std::chrono::steady_clock::now();
  session.forward(ids, logits, static_cast<std::int64_t>(ids.size()) - 1);
  const auto t1 = std::chrono::steady_clock::now();
  const double cpu1 = process_cpu_seconds();
  const auto first = static_cast<std::int64_t>(ids.size());
  std::cout << prompt_text << std::flush;
  for (std::int64_t i = 0; i < o.tokens; ++i) {
    const std::int32_t next = pick(logits, o.temperature, rng);
    if (next == tok.bos_id() || next == tok.eos_id()) break;  // the stories end with BOS
    std::string text = tok.decode(next);
    if (ids.size() == 1 && !text.empty() && text[0] == ' ') text.erase(0, 1);  // the dummy prefix
    std::cout << text << std::flush;
    ids.push_back(next);
    session.forward(std::span<const std::int32_t>(&ids.back(), 1), logits);
  }
  std::cout << "\n" << std::flush;
  const double prompt_s = std::chrono::duration<double>(t1 - t0).count();
  const double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
  const double gen_cpu = process_cpu_seconds() - cpu1;
  const std::int64_t generated = static_cast<std::int64_t>(ids.size()) - first;
  std::cerr << fmt::format(
      "generate: BOS + prompt, {} tokens, in {:.3f} s; {} tokens generated at positions {} .. {} "
      "in {:.3f} s ({:.0f} tokens/s; {:.3f} CPU s, all threads)\n",
      first, prompt_s, generated, first, first + generated - 1, gen_s,
      gen_s > 0 ? static_cast<double>(generated) / gen_s : 0.0, gen_cpu);
}

}  // namespace

void add_generate(CLI::App& app) {
  auto o = std::make_shared<GenerateOptions>();
  o->threads = std::min(hardware_threads(), kMaxThreads);
  CLI::App* cmd = app.add_subcommand(
      "generate",
      "Continue a prompt with a Llama model file (llama2.ts v1 format, e.g. stories260K): greedy "
      "by "
      "default, with any RoPE scaling method. Prints the prompt and its continuation.");
  add_text(cmd, "--model", o->model, "The model file (v1 format)", "PATH")->required();
  CLI::Option* prompt = cmd->add_option("--prompt", o->prompt, "The text to continue");
  CLI::Option* prompt_file =
      add_text(cmd, "--prompt-file", o->prompt_file,
               "Continue this text file instead (read as `eval --text` reads it)", "PATH");
  prompt->excludes(prompt_file);
  prompt_file->excludes(prompt);
  o->prompt_option = prompt;
  add_integer(cmd, "--prompt-tokens", o->prompt_tokens, std::int64_t{0},
              std::numeric_limits<std::int64_t>::max(),
              "Keep only the first N tokens of the prompt (with --prompt-file: start generating "
              "at position N + 1, e.g. to time decoding at a given context)");
  add_integer(cmd, "--tokens", o->tokens, std::numeric_limits<std::int64_t>::min(),
              std::numeric_limits<std::int64_t>::max(),
              "Tokens to generate at most (stops early at BOS/EOS); at most the KV cache's "
              "positions (4 GiB of "
              "keys and values: 3355443 for stories260K) less BOS and the prompt")
      ->capture_default_str();
  add_number(cmd, "--temperature", o->temperature,
             "0: greedy; else sample from softmax(logits / T)")
      ->capture_default_str();
  o->seed_option = add_integer(cmd, "--seed", o->seed, std::uint64_t{0},
                               std::numeric_limits<std::uint64_t>::max(),
                               "Seed of the sampler (with --temperature above 0)")
                       ->capture_default_str();
  o->method_option = add_text(cmd, "--method", o->method,
                              "RoPE scaling method (none, linear, ntk, yarn, yarn-paper, dynamic, "
                              "dynamic-yarn, llama3; default: M.json's beside the model, if any, "
                              "with its factor and method parameters)",
                              "METHOD")
                         ->capture_default_str();
  add_number(cmd, "--factor", o->factor,
             "Scaling factor s (default 1; not with none or dynamic-yarn)");
  add_method_param_flags(cmd, o->params, kMethodParamGroup, false);
  add_threads(cmd, o->threads, "Threads of the forward pass");
  cmd->callback([o] { run_generate(*o); });
}

}  // namespace posenc::cli
