// Uses the installed posenc: Llama 2 7B with YaRN x16 must give attention factor 0.1 ln 16 + 1.
#include <cmath>
#include <cstdio>

#include <posenc/posenc.h>

int main() {
  posenc::RopeSpec spec;
  spec.method = posenc::Method::kYarn;
  spec.head_dim = spec.rotary_dim = 128;
  spec.factor = 16;
  spec.original_max_position_embeddings = 4096;
  const posenc::Frequencies f = posenc::compute_frequencies(spec);
  const double expected = 0.1 * std::log(16.0) + 1.0;
  std::printf("posenc %s: attention factor %.10f (expected %.10f)\n", POSENC_VERSION_STRING,
              f.attention_factor, expected);
  return std::abs(f.attention_factor - expected) < 1e-15 ? 0 : 1;
}
