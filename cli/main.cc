// posenc: command-line front door of the library. Errors go to stderr with a non-zero exit.
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "commands.h"
#include "posenc/error.h"
#include "posenc/version.h"

int main(int argc, char** argv) {
  CLI::App app{"posenc: transformer positional encodings (sinusoidal, RoPE and its context "
               "extensions)"};
  app.set_version_flag("--version", POSENC_VERSION_STRING);
  app.require_subcommand(1);
  posenc::cli::add_inspect(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const posenc::Error& e) {
    std::cerr << "posenc: error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "posenc: internal error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
