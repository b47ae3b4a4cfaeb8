// The sinusoidal encoding of Vaswani et al. 2017, §3.5, and its shift matrix (sinusoidal.h).
#include "posenc/core/sinusoidal.h"

#include <cmath>
#include <string>

#include "posenc/core/cos_sin.h"
#include "posenc/core/error.h"
#include "util/format.h"

namespace posenc {
namespace {

// Dims holding sin and cos of frequency k.
struct DimPair {
  std::size_t sin_dim;
  std::size_t cos_dim;
};

DimPair dims_of(const SinusoidalSpec& spec, std::size_t k) {
  if (spec.layout == SinusoidalLayout::kInterleaved) return {2 * k, 2 * k + 1};
  return {k, static_cast<std::size_t>(spec.d_model / 2) + k};
}

template <typename T>
void add_rows(const SinusoidalSpec& spec, std::span<T> embeddings, std::int64_t rows,
              std::int64_t first) {
  validate(spec);
  const auto d = static_cast<std::size_t>(spec.d_model);
  if (rows < 0 || embeddings.size() != static_cast<std::size_t>(rows) * d) {
    throw Error("add_sinusoidal: embeddings has " + std::to_string(embeddings.size()) +
                " values; expected rows (" + std::to_string(rows) + ") * d_model (" +
                std::to_string(spec.d_model) + ")");
  }
  std::vector<double> row(d);
  for (std::int64_t r = 0; r < rows; ++r) {
    sinusoidal_row(spec, first + r, row);
    T* out = embeddings.data() + static_cast<std::size_t>(r) * d;
    for (std::size_t j = 0; j < d; ++j)
      out[j] = static_cast<T>(static_cast<double>(out[j]) + row[j]);
  }
}

}  // namespace

std::string_view sinusoidal_layout_name(SinusoidalLayout layout) {
  return layout == SinusoidalLayout::kInterleaved ? "interleaved" : "concatenated";
}

SinusoidalLayout parse_sinusoidal_layout(std::string_view name, std::string_view field) {
  if (name == "interleaved") return SinusoidalLayout::kInterleaved;
  if (name == "concatenated") return SinusoidalLayout::kConcatenated;
  throw Error(std::string(field) + " (\"" + std::string(name) +
              "\") must be interleaved or concatenated");
}

void validate(const SinusoidalSpec& spec) {
  if (spec.d_model <= 0 || spec.d_model % 2 != 0) {
    throw Error("sinusoidal: d_model (" + std::to_string(spec.d_model) +
                ") must be a positive even number");
  }
  if (!(std::isfinite(spec.base) && spec.base > 0)) {
    throw Error("sinusoidal: base (" + detail::num(spec.base) +
                ") must be a finite number greater than 0");
  }
}

std::vector<double> sinusoidal_frequencies(const SinusoidalSpec& spec) {
  validate(spec);
  std::vector<double> w(static_cast<std::size_t>(spec.d_model / 2));
  for (std::size_t k = 0; k < w.size(); ++k) {
    w[k] = std::pow(spec.base, -2.0 * static_cast<double>(k) / static_cast<double>(spec.d_model));
  }
  return w;
}

void sinusoidal_row(const SinusoidalSpec& spec, std::int64_t position, std::span<double> out) {
  const std::vector<double> w = sinusoidal_frequencies(spec);
  if (out.size() != static_cast<std::size_t>(spec.d_model)) {
    throw Error("sinusoidal_row: out has " + std::to_string(out.size()) +
                " entries; expected d_model (" + std::to_string(spec.d_model) + ")");
  }
  for (std::size_t k = 0; k < w.size(); ++k) {
    const DimPair d = dims_of(spec, k);
    exact_sincos(position, w[k], out[d.sin_dim], out[d.cos_dim]);
  }
}

std::vector<double> sinusoidal_table(const SinusoidalSpec& spec, std::int64_t count,
                                     std::int64_t first) {
  validate(spec);
  if (count < 0)
    throw Error("sinusoidal_table: count (" + std::to_string(count) + ") must not be negative");
  const auto d = static_cast<std::size_t>(spec.d_model);
  std::vector<double> table(static_cast<std::size_t>(count) * d);
  for (std::int64_t r = 0; r < count; ++r) {
    sinusoidal_row(spec, first + r,
                   std::span<double>(table).subspan(static_cast<std::size_t>(r) * d, d));
  }
  return table;
}

void add_sinusoidal(const SinusoidalSpec& spec, std::span<float> embeddings, std::int64_t rows,
                    std::int64_t first) {
  add_rows(spec, embeddings, rows, first);
}

void add_sinusoidal(const SinusoidalSpec& spec, std::span<double> embeddings, std::int64_t rows,
                    std::int64_t first) {
  add_rows(spec, embeddings, rows, first);
}

std::vector<double> sinusoidal_shift_matrix(const SinusoidalSpec& spec, std::int64_t delta) {
  const std::vector<double> w = sinusoidal_frequencies(spec);
  const auto d = static_cast<std::size_t>(spec.d_model);
  std::vector<double> t(d * d, 0.0);
  for (std::size_t k = 0; k < w.size(); ++k) {
    double s, c;
    exact_sincos(delta, w[k], s, c);
    const DimPair p = dims_of(spec, k);
    // sin(a + b) = sin a cos b + cos a sin b;  cos(a + b) = cos a cos b - sin a sin b.
    t[p.sin_dim * d + p.sin_dim] = c;
    t[p.sin_dim * d + p.cos_dim] = s;
    t[p.cos_dim * d + p.sin_dim] = -s;
    t[p.cos_dim * d + p.cos_dim] = c;
  }
  return t;
}

}  // namespace posenc
