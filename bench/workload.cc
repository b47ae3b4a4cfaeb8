#include "workload.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <span>

#include <fmt/format.h>

#include "posenc/core/error.h"
#include "posenc/core/spec.h"
#include "posenc/rope/apply.h"
#include "stream.h"

namespace posenc::bench {
namespace {

// Scalar float32 <-> float16 / bfloat16, round to nearest even: the textbook recipes, written
// here rather than shared with src/ so the baseline owes nothing to the kernels.
float from_bf16(std::uint16_t h) {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

std::uint16_t to_bf16(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x40u);
  return static_cast<std::uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}

float from_f16(std::uint16_t h) {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1Fu;
  const std::uint32_t mant = h & 0x3FFu;
  if (exp == 0x1F) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  if (exp == 0) {
    const float v = static_cast<float>(mant) * 0x1p-24f;  // subnormal: mant * 2^-24, exact
    return sign ? -v : v;
  }
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));  // 112 = 127 - 15
}

std::uint16_t to_f16(float f) {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((bits >> 16) & 0x8000u);
  const std::uint32_t a = bits & 0x7FFFFFFFu;
  std::uint32_t out;
  if (a > 0x7F800000u) {
    out = 0x7E00u;  // NaN
  } else if (a >= 0x477FF000u) {
    out = 0x7C00u;  // 65520 and up round to infinity
  } else if (a < 0x38800000u) {
    // Below 2^-14 (float16 subnormals): adding 0.5, whose float32 ulp is 2^-24 (the float16
    // subnormal step), makes the FPU round to nearest even for us.
    out = std::bit_cast<std::uint32_t>(std::bit_cast<float>(a) + 0.5f) - 0x3F000000u;
  } else {
    // Re-bias the exponent by (15 - 127) << 23 and round on the 13 dropped bits.
    out = (a + 0xC8000FFFu + ((a >> 13) & 1u)) >> 13;
  }
  return static_cast<std::uint16_t>(out | sign);
}

template <DType kDType>
struct Storage {
  using Type = std::uint16_t;
  static float load(Type x) { return kDType == DType::kF16 ? from_f16(x) : from_bf16(x); }
  static Type store(float v) { return kDType == DType::kF16 ? to_f16(v) : to_bf16(v); }
};
template <>
struct Storage<DType::kF32> {
  using Type = float;
  static float load(float x) { return x; }
  static float store(float v) { return v; }
};

// The baseline a reader would write first: pairs (i, i + n) half-split or (2i, 2i + 1)
// interleaved of the first rotary dims, y = R(theta) x.
template <DType kDType>
void rotate_scalar_as(void* data, const Shape& shape, const float* cos_rows,
                      const float* sin_rows) {
  using S = Storage<kDType>;
  auto* x = static_cast<typename S::Type*>(data);
  const std::int64_t n = shape.rotary() / 2;
  const std::int64_t partner = shape.interleaved ? 1 : n;
  for (std::int64_t t = 0; t < shape.tokens; ++t) {
    const float* c = cos_rows + t * n;
    const float* s = sin_rows + t * n;
    for (std::int64_t h = 0; h < shape.heads; ++h) {
      auto* head = x + (t * shape.heads + h) * shape.head_dim;
      for (std::int64_t i = 0; i < n; ++i) {
        const std::int64_t first = shape.interleaved ? 2 * i : i;
        const float a = S::load(head[first]);
        const float b = S::load(head[first + partner]);
        head[first] = S::store(a * c[i] - b * s[i]);
        head[first + partner] = S::store(b * c[i] + a * s[i]);
      }
    }
  }
}

float element(const std::byte* data, DType dtype, std::int64_t i) {
  if (dtype == DType::kF32) {
    float v;
    std::memcpy(&v, data + i * 4, 4);
    return v;
  }
  std::uint16_t h;
  std::memcpy(&h, data + i * 2, 2);
  return dtype == DType::kF16 ? from_f16(h) : from_bf16(h);
}

RopeSpec plain_rope(const Shape& shape) {
  RopeSpec spec;
  spec.head_dim = shape.head_dim;
  spec.rotary_dim = shape.rotary();
  spec.layout = shape.interleaved ? Layout::kInterleaved : Layout::kHalfSplit;
  if (shape.mrope) {
    const std::int64_t sections[] = {16, 24, 24};
    spec.axis_map = mrope_sections(sections);
  }
  return spec;
}

}  // namespace

void Workload::FreeDeleter::operator()(void* p) const { std::free(p); }

Workload::Buffer Workload::allocate(std::size_t bytes) {
  constexpr std::size_t kAlign = 64;  // a cache line, and one AVX-512 vector
  void* p = std::aligned_alloc(kAlign, (bytes + kAlign - 1) / kAlign * kAlign);
  if (p == nullptr) throw std::bad_alloc();
  return Buffer(static_cast<std::byte*>(p));
}

Workload::Workload(const Shape& shape, DType dtype)
    : shape_(shape),
      dtype_(dtype),
      bytes_(static_cast<std::size_t>(shape.tokens * shape.heads * shape.head_dim) *
             dtype_size(dtype)),
      freqs_(compute_frequencies(plain_rope(shape))),
      data_(allocate(bytes_)),
      copy_(allocate(bytes_)) {
  const std::int64_t n = shape.rotary() / 2;
  const std::int64_t axes = axis_count(freqs_.spec);
  positions_ = case_positions(shape);
  if (static_cast<std::int64_t>(positions_.size()) != axes * shape.tokens) {
    throw Error(fmt::format("bench shape {}: {} positions for {} axes of {} tokens", shape.name,
                            positions_.size(), axes, shape.tokens));
  }
  table_ = std::make_unique<CosSinTable>(freqs_, shape.first_position + shape.tokens);
  cos_rows_.resize(static_cast<std::size_t>(shape.tokens * n));
  sin_rows_.resize(cos_rows_.size());
  for (std::int64_t t = 0; t < shape.tokens; ++t) {
    std::vector<std::int64_t> at;
    for (std::int64_t a = 0; a < axes; ++a)
      at.push_back(positions_[static_cast<std::size_t>(a * shape.tokens + t)]);
    cos_sin_row_f32(freqs_, at, {cos_rows_.data() + t * n, static_cast<std::size_t>(n)},
                    {sin_rows_.data() + t * n, static_cast<std::size_t>(n)});
  }
  // Uniform values in [-1, 1) from a fixed xorshift64 stream; writing them also faults in every
  // page of both buffers before anything is timed.
  std::uint64_t state = 0x9E3779B97F4A7C15u;
  const std::int64_t count = shape.tokens * shape.heads * shape.head_dim;
  for (std::int64_t i = 0; i < count; ++i) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    const float v = static_cast<float>(state >> 40) * 0x1p-23f - 1.0f;  // 24 random bits
    std::byte* p = data_.get();
    if (dtype == DType::kF32) {
      std::memcpy(p + i * 4, &v, 4);
    } else {
      const std::uint16_t h = dtype == DType::kF16 ? to_f16(v) : to_bf16(v);
      std::memcpy(p + i * 2, &h, 2);
    }
  }
  std::memcpy(copy_.get(), data_.get(), bytes_);
}

int Workload::rotate(bool use_table, int threads) {
  RopeArgs args;
  args.q =
      TensorView::contiguous(data_.get(), dtype_, shape_.tokens, shape_.heads, shape_.head_dim);
  args.positions = std::span<const std::int64_t>(positions_);
  args.table = use_table ? table_.get() : nullptr;
  args.threads = threads;
  return apply_rope(freqs_, args);
}

void Workload::copy() { std::memcpy(copy_.get(), data_.get(), bytes_); }

// Scaling by -1 keeps every value's magnitude, so repeated calls never drift into denormals.
void Workload::stream(bool prefetch) {
  stream_scale(data_.get(), dtype_, shape_.tokens * shape_.heads * shape_.head_dim, -1.0f,
               prefetch);
}

void Workload::rotate_scalar() {
  switch (dtype_) {
    case DType::kF32:
      rotate_scalar_as<DType::kF32>(data_.get(), shape_, cos_rows_.data(), sin_rows_.data());
      break;
    case DType::kF16:
      rotate_scalar_as<DType::kF16>(data_.get(), shape_, cos_rows_.data(), sin_rows_.data());
      break;
    case DType::kBF16:
      rotate_scalar_as<DType::kBF16>(data_.get(), shape_, cos_rows_.data(), sin_rows_.data());
      break;
  }
}

double Workload::max_difference(bool use_table, int threads) {
  copy();
  rotate(use_table, threads);
  // The scalar loop runs on the copy: swap the buffers around it.
  std::swap(data_, copy_);
  rotate_scalar();
  std::swap(data_, copy_);
  double worst = 0;
  const std::int64_t count = shape_.tokens * shape_.heads * shape_.head_dim;
  for (std::int64_t i = 0; i < count; ++i) {
    const double d = std::abs(static_cast<double>(element(data_.get(), dtype_, i)) -
                              static_cast<double>(element(copy_.get(), dtype_, i)));
    if (std::isnan(d)) return d;
    worst = std::max(worst, d);
  }
  return worst;
}

double Workload::tolerance() const {
  const double eps = dtype_ == DType::kF32   ? std::numeric_limits<float>::epsilon()
                     : dtype_ == DType::kF16 ? 0x1p-10  // 10 stored mantissa bits
                                             : 0x1p-7;  // bfloat16: 7
  return 8 * eps;
}

}  // namespace posenc::bench
