// cli/commands.h: the subcommands of the posenc tool. Each registers itself on the app and runs
// when chosen; errors reach main() as posenc::Error.
#pragma once

#include <CLI/CLI.hpp>

namespace posenc::cli {

// `posenc inspect CONFIG`: per-pair frequencies and scalars of a model's RoPE.
void add_inspect(CLI::App& app);

// `posenc presets [--json]`: the built-in models that --preset NAME accepts.
void add_presets(CLI::App& app);

// `posenc bench`: the benchmark cases (bench/cases.h) timed against memcpy and a scalar loop.
void add_bench(CLI::App& app);

// `posenc verify`: the seed document's claims, measured.
void add_verify(CLI::App& app);

// `posenc apply --q Q.npy [--k K.npy] --positions P.npy -o OUT.npy`: rotate tensors from .npy
// files.
void add_apply(CLI::App& app);

// `posenc targets`: the SIMD targets compiled in, which this CPU supports, and which one runs.
void add_targets(CLI::App& app);

// `posenc plot KIND [MODEL] -o FILE.svg`: one figure (sinusoidal, similarity, wavelengths,
// yarn-ramp, decay, attention-factor) as an SVG file.
void add_plot(CLI::App& app);

// `posenc report [MODEL] -o report.html`: one self-contained HTML page with every figure, the
// per-pair table, the engine comparison and the verify results.
void add_report(CLI::App& app);

// `posenc compare MODEL [--positions P,...] [--seq-len N] [--json]`: the model's RoPE as
// transformers, llama.cpp and vLLM compute it, against float64, with a verdict per engine.
void add_compare(CLI::App& app);

// `posenc doctor MODEL [--json]`: the known pitfalls of the model's RoPE across engines, each with
// what to do. Exit status 0 even with findings; 1 on bad input.
void add_doctor(CLI::App& app);

// `posenc generate --model M --prompt TEXT`: continue a prompt with a Llama model (stories260K).
void add_generate(CLI::App& app);

// `posenc eval --model M --text T`: perplexity for every (RoPE scaling method, context).
void add_eval(CLI::App& app);

// `posenc mrope-positions CONFIG --layout LAYOUT [--rule hf-4.5|hf-5.3] [--json] [--cos-sin
// --numerics precise|hf]`: M-RoPE
// position ids [3, tokens] and rope_deltas of text, images and videos for a VL model.
void add_mrope_positions(CLI::App& app);

// `posenc vision-positions CONFIG [--grid TxHxW] [--window] [--json] [--cos-sin --numerics N]`:
// a vision tower's 2D RoPE positions (and cos/sin) of its patches.
void add_vision_positions(CLI::App& app);

}  // namespace posenc::cli
