// posenc/posenc.h: the whole public API, every header below. Where to start, layer by layer (each
// layer uses only layers listed before it; docs/design.md §2 draws the data flow):
//   core/      spec.h (RopeSpec, the methods and their traits), method_params.h (a method's parameters
//              beyond its factor, one key and flag each) -> frequencies.h (inv_freq and the
//              two scalars, in the numerics.h conventions) -> cos_sin.h; ggml.h (llama.cpp's
//              parameters), sinusoidal.h, mrope_positions.h (M-RoPE ids of text, images,
//              videos), defaults.h, error.h, threads.h
//   rope/      the hot path: tensor.h (views), table.h (cos/sin rows), apply.h (apply_rope,
//              rerotate_keys), kv_cache.h (fused RoPE + paged KV-cache append), targets.h
//              (SIMD targets)
//   io/        models in: model.h (load_model: config.json or GGUF), config.h, gguf.h, presets.h,
//              extend.h (--scaling), npy.h, vision_config.h
//   analysis/  engines.h (transformers, llama.cpp, vLLM side by side), doctor.h, verify.h, pairs.h
//   llama/     llama.h (the stories260K model), perplexity.h, attention.h (fused, for training)
//   report/    svg.h, figures.h, report.h (the HTML page), json.h (the --json of inspect,
//              compare and doctor)
#pragma once

#include "posenc/analysis/doctor.h"
#include "posenc/analysis/engines.h"
#include "posenc/analysis/pairs.h"
#include "posenc/analysis/verify.h"
#include "posenc/core/cos_sin.h"
#include "posenc/core/defaults.h"
#include "posenc/core/dual_chunk.h"
#include "posenc/core/error.h"
#include "posenc/core/frequencies.h"
#include "posenc/core/ggml.h"
#include "posenc/core/method_params.h"
#include "posenc/core/mrope_positions.h"
#include "posenc/core/numerics.h"
#include "posenc/core/sinusoidal.h"
#include "posenc/core/spec.h"
#include "posenc/core/threads.h"
#include "posenc/core/vision_positions.h"
#include "posenc/io/config.h"
#include "posenc/io/extend.h"
#include "posenc/io/gguf.h"
#include "posenc/io/model.h"
#include "posenc/io/npy.h"
#include "posenc/io/presets.h"
#include "posenc/io/vision_config.h"
#include "posenc/llama/attention.h"
#include "posenc/llama/llama.h"
#include "posenc/llama/perplexity.h"
#include "posenc/report/figures.h"
#include "posenc/report/json.h"
#include "posenc/report/report.h"
#include "posenc/report/svg.h"
#include "posenc/rope/apply.h"
#include "posenc/rope/kv_cache.h"
#include "posenc/rope/table.h"
#include "posenc/rope/targets.h"
#include "posenc/rope/tensor.h"
#include "posenc/version.h"
