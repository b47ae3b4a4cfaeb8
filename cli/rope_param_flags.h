// cli/rope_param_flags.h: the flags of a scaling method's parameters beyond its factor
// (--attention-factor, --beta-fast, ..., posenc/llama/rope_params.h) on eval and generate, the
// commands that run a llama2.ts model.
#pragma once

#include <CLI/CLI.hpp>

#include "posenc/llama/rope_params.h"

namespace posenc::cli {

// Registers one flag per entry of llama::rope_param_table() on `cmd`, in the group "Method
// parameters", each setting its field of `params` when given.
void add_rope_param_flags(CLI::App* cmd, llama::RopeParams& params);

}  // namespace posenc::cli
