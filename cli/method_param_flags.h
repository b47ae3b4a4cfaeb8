// cli/method_param_flags.h: the flags of a scaling method's parameters beyond its factor
// (--beta-fast, --attention-factor, ..., posenc/core/method_params.h): --scaling's on every
// command that takes a model (model_source.h), and eval's and generate's.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "posenc/core/method_params.h"

namespace posenc::cli {

// The group eval and generate show them in.
inline constexpr const char* kMethodParamGroup =
    "Method parameters (default: the method's; a sidecar's when given)";

// Registers one flag per row of method_param_table() on `cmd`, in option group `group`, each
// setting its field of `params` when given. Without `alpha`, --alpha (ntk-alpha's, which a
// llama2.ts model's method list does not offer) is left out.
void add_method_param_flags(CLI::App* cmd, MethodParams& params, const std::string& group,
                            bool alpha);

}  // namespace posenc::cli
