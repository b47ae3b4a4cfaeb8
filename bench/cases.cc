#include "cases.h"

#include <fmt/format.h>

namespace posenc::bench {

std::span<const Shape> shapes() {
  // Llama 2 7B: hidden 4096 = 32 heads x 128, context 4096 (Touvron et al. 2023, Table 1 and the
  // published config.json). Decode rotates the one new token at the last position of the context.
  static constexpr Shape kShapes[] = {
      {"llama2-7b-prefill-q", 4096, 32, 128, 0},
      {"llama2-7b-prefill-gqa-k", 4096, 8, 128, 0},
      {"llama2-7b-decode", 1, 32, 128, 4095},
      {"head_dim-64", 4096, 16, 64, 0},
      {"head_dim-256", 2048, 8, 256, 0},
      // Multi-axis at the prefill shape: its time over llama2-7b-prefill-q's is M-RoPE's cost.
      {"mrope-prefill-q", 4096, 32, 128, 0, true},
  };
  return kShapes;
}

std::vector<Case> all_cases(std::span<const int> threads) {
  std::vector<Case> out;
  for (const Shape& shape : shapes()) {
    for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16}) {
      for (bool table : {true, false}) {
        for (int t : threads) {
          out.push_back({fmt::format("{}/{}/{}/threads:{}", shape.name, dtype_name(dtype),
                                     table ? "table" : "on-the-fly", t),
                         shape, dtype, table, t});
        }
      }
    }
  }
  return out;
}

}  // namespace posenc::bench
