// cli/commands.h: the subcommands of the posenc tool. Each registers itself on the app and runs
// when chosen; errors reach main() as posenc::Error.
#pragma once

#include <CLI/CLI.hpp>

namespace posenc::cli {

// `posenc inspect CONFIG`: per-pair frequencies and scalars of a model's RoPE.
void add_inspect(CLI::App& app);

}  // namespace posenc::cli
