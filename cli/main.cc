// posenc: command-line front door of the library. Errors go to stderr with a non-zero exit.
#include <exception>
#include <functional>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "posenc/core/error.h"
#include "posenc/version.h"

int main(int argc, char** argv) {
  CLI::App app{
      "posenc: transformer positional encodings (sinusoidal, RoPE and its context "
      "extensions)"};
  app.set_version_flag("--version", POSENC_VERSION_STRING);
  app.require_subcommand(1);
  posenc::cli::add_inspect(app);
  posenc::cli::add_compare(app);
  posenc::cli::add_doctor(app);
  posenc::cli::add_presets(app);
  posenc::cli::add_verify(app);
  posenc::cli::add_bench(app);
  posenc::cli::add_apply(app);
  posenc::cli::add_targets(app);
  posenc::cli::add_plot(app);
  posenc::cli::add_report(app);
  posenc::cli::add_generate(app);
  posenc::cli::add_eval(app);
  posenc::cli::add_mrope_positions(app);
  posenc::cli::add_vision_positions(app);
  std::string commands;
  bool known = false;
  const CLI::App& all = app;
  for (const CLI::App* sub : all.get_subcommands(std::function<bool(const CLI::App*)>{})) {
    commands += (commands.empty() ? "" : ", ") + sub->get_name();
    known = known || (argc > 1 && sub->check_name(argv[1]));
  }
  if (argc == 1) {
    std::cerr << "posenc: error: a command is required: one of " << commands
              << " (posenc --help)\n";
    return 1;
  }
  // The first word is the command: name an unknown one (CLI11 would only say that one is required).
  if (argv[1][0] != '-' && !known) {
    std::cerr << "posenc: error: unknown command \"" << argv[1]
              << "\"; the commands are: " << commands << " (posenc COMMAND --help for each)\n";
    return 1;
  }
  try {
    app.parse(argc, argv);

  } catch (const CLI::ParseError& e) {
    // CLI11 numbers its errors 100 and up; every command-line error is status 1 here, as the
    // errors the commands themselves throw are.
    return app.exit(e) == 0 ? 0 : 1;
  } catch (const posenc::Error& e) {
    std::cerr << "posenc: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "posenc: internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
