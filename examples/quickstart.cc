// The README's C++ example as a program: a model's RoPE from its config.json, its frequencies in
// transformers' float32 convention, a cos/sin table, and q/k rotated in place.
//   quickstart [config.json]     (default: examples/configs/llama-3.1-8b.json)
#include <cstdint>
#include <cstdio>
#include <exception>
#include <span>
#include <vector>

#include <posenc/posenc.h>

int main(int argc, char** argv) try {
  const char* path = argc > 1 ? argv[1] : "examples/configs/llama-3.1-8b.json";
  const posenc::ModelConfig model = posenc::load_hf_config(path);
  const posenc::Frequencies f = posenc::compute_frequencies(model.spec, posenc::Numerics::kHf);
  const posenc::CosSinTable table(f, 131072);  // cos/sin per position, built once

  // q and k: [tokens, heads, head_dim], 32 query heads and 8 key heads (GQA); every pair (1, 0).
  const std::int64_t tokens = 3, head_dim = model.spec.head_dim;
  std::vector<float> q(static_cast<std::size_t>(tokens * 32 * head_dim), 0.0f);
  std::vector<float> k(static_cast<std::size_t>(tokens * 8 * head_dim), 0.0f);
  for (std::size_t i = 0; i < q.size(); i += static_cast<std::size_t>(head_dim)) q[i] = 1.0f;
  for (std::size_t i = 0; i < k.size(); i += static_cast<std::size_t>(head_dim)) k[i] = 1.0f;
  const std::vector<std::int32_t> positions = {0, 1, 100000};

  posenc::RopeArgs args;
  args.q = posenc::TensorView::contiguous(q.data(), posenc::DType::kF32, tokens, 32, head_dim);
  args.k = posenc::TensorView::contiguous(k.data(), posenc::DType::kF32, tokens, 8, head_dim);
  args.positions = std::span<const std::int32_t>(positions);
  args.table = &table;
  posenc::apply_rope(f, args);  // in place, SIMD, any positions (f16 and bf16 alike)

  std::printf("%s: rope_type %s, %zu pairs, inv_freq[0] %.7g, inv_freq[%zu] %.7g\n", path,
              posenc::method_name(model.spec).c_str(), f.inv_freq.size(), f.inv_freq.front(),
              f.inv_freq.size() - 1, f.inv_freq.back());
  for (std::int64_t t = 0; t < tokens; ++t) {
    const float* x = q.data() + t * 32 * head_dim;  // head 0; pair 0 is (x[0], x[head_dim / 2])
    std::printf("position %6d: q pair 0 = (%.7f, %.7f)\n", positions[static_cast<std::size_t>(t)],
                x[0], x[head_dim / 2]);
  }
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "quickstart: %s\n", e.what());
  return 1;
}
