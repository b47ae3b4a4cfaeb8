// Names of the numeric conventions.
#include "posenc/core/numerics.h"

#include <string>

#include "posenc/core/error.h"

namespace posenc {

std::string_view numerics_name(Numerics numerics) {
  switch (numerics) {
    case Numerics::kPrecise:
      return "precise";
    case Numerics::kHf:
      return "hf";
    case Numerics::kGgml:
      return "ggml";
  }
  return "?";
}

Numerics parse_numerics(std::string_view name, std::string_view field) {
  for (Numerics n : {Numerics::kPrecise, Numerics::kHf, Numerics::kGgml}) {
    if (name == numerics_name(n)) return n;
  }
  throw Error(std::string(field) + " (\"" + std::string(name) +
              "\") must be one of precise, hf, ggml");
}

}  // namespace posenc
