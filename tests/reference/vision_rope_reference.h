// tests/reference/vision_rope_reference.h: an independent float64 reference of vision towers'
// 2D RoPE, written from the formulas of ../shared/docs/rope-in-engines.md 1.4 and transformers'
// modeling code in the shape those compute them (a reshape/permute of index grids, a padded
// window grid, a per-axis frequency table indexed by position). It includes no posenc header.
//
//   Qwen2-VL / 2.5-VL / 3-VL: VisionRotaryEmbedding(dim = head_dim / 2): inv_freq[k] =
//     1e4^(-2k / dim), k < dim / 2; freqs = outer(arange(max), inv_freq); rotary_pos_emb =
//     freqs[pos_ids].flatten(1) = [freqs[r] | freqs[c]]; emb = cat(rotary_pos_emb, twice).
//   Llama 4: rope_freq[k] = theta^(-2k / freq_dim), freq_dim = head_dim / 2, k < freq_dim / 2;
//     freqs = cat(x * rope_freq, y * rope_freq) (the repeat_interleave(2) then [..., ::2] is the
//     identity on the sequence of values), class token masked to 0.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace posenc_ref {

// One ladder of `count` frequencies theta^(-2k / dim).
inline std::vector<double> VisionLadder(double theta, std::int64_t dim, std::int64_t count) {
  std::vector<double> f;
  for (std::int64_t k = 0; k < count; ++k)
    f.push_back(std::pow(theta, -2.0 * static_cast<double>(k) / static_cast<double>(dim)));
  return f;
}

// The per-slot frequencies of a two-axis tower with head_dim: [ladder | ladder] (n = head_dim/2).
inline std::vector<double> VisionSlotFrequencies(double theta, std::int64_t head_dim) {
  const std::int64_t dim = head_dim / 2;
  std::vector<double> l = VisionLadder(theta, dim, dim / 2);
  std::vector<double> out = l;
  out.insert(out.end(), l.begin(), l.end());
  return out;
}

struct VisionRefPositions {
  std::vector<std::int64_t> a0, a1;  // per patch: the first and the second section's coordinate
};

// Qwen rot_pos_emb: hpos = arange(h)[:, None].expand(h, w); hpos.reshape(h/m, m, w/m, m)
// .permute(0, 2, 1, 3).flatten(); wpos the same from arange(w)[None, :]; repeated t times.
inline VisionRefPositions QwenMergeOrder(std::int64_t t, std::int64_t h, std::int64_t w,
                                         std::int64_t m) {
  VisionRefPositions p;
  // Index (a, b, c, d) of the [h/m, m, w/m, m] view is grid cell (a*m + b, c*m + d); permuted
  // (0, 2, 1, 3) the flat order runs a, c, b, d.
  for (std::int64_t rep = 0; rep < t; ++rep) {
    for (std::int64_t a = 0; a < h / m; ++a)
      for (std::int64_t c = 0; c < w / m; ++c)
        for (std::int64_t b = 0; b < m; ++b)
          for (std::int64_t d = 0; d < m; ++d) {
            p.a0.push_back(a * m + b);
            p.a1.push_back(c * m + d);
          }
  }
  return p;
}

// Qwen2.5-VL get_window_index: the merge-unit grid [t, H', W'] padded with -100 to whole windows
// of `ws` units (pad = ws - H' % ws, a whole extra window when it divides), viewed
// [t, nh, ws, nw, ws], permuted (0, 1, 3, 2, 4), flattened, the padding dropped.
inline std::vector<std::int64_t> QwenWindowIndex(std::int64_t t, std::int64_t hh, std::int64_t ww,
                                                 std::int64_t ws) {
  const std::int64_t ph = hh + (ws - hh % ws), pw = ww + (ws - ww % ws);
  std::vector<std::int64_t> padded(static_cast<std::size_t>(t * ph * pw), -100);
  for (std::int64_t k = 0; k < t; ++k)
    for (std::int64_t r = 0; r < hh; ++r)
      for (std::int64_t c = 0; c < ww; ++c)
        padded[static_cast<std::size_t>((k * ph + r) * pw + c)] = (k * hh + r) * ww + c;
  std::vector<std::int64_t> out;
  const std::int64_t nh = ph / ws, nw = pw / ws;
  for (std::int64_t k = 0; k < t; ++k)
    for (std::int64_t i = 0; i < nh; ++i)
      for (std::int64_t j = 0; j < nw; ++j)
        for (std::int64_t a = 0; a < ws; ++a)
          for (std::int64_t b = 0; b < ws; ++b) {
            const std::int64_t v =
                padded[static_cast<std::size_t>((k * ph + i * ws + a) * pw + j * ws + b)];
            if (v != -100) out.push_back(v);
          }
  return out;
}

// rotary_pos_emb.reshape(seq / unit, unit, -1)[window_index].reshape(seq, -1), on positions.
inline VisionRefPositions ReorderUnits(const VisionRefPositions& p,
                                       const std::vector<std::int64_t>& index, std::int64_t unit) {
  VisionRefPositions out;
  for (const std::int64_t u : index)
    for (std::int64_t k = 0; k < unit; ++k) {
      out.a0.push_back(p.a0[static_cast<std::size_t>(u * unit + k)]);
      out.a1.push_back(p.a1[static_cast<std::size_t>(u * unit + k)]);
    }
  return out;
}

// Llama4VisionRotaryEmbedding: img_idx = arange(S*S) then one more entry, -2 (the class token);
// x = idx % S, y = idx // S, plus 1; the class token's frequencies masked to 0.
inline VisionRefPositions Llama4Positions(std::int64_t side) {
  VisionRefPositions p;
  for (std::int64_t idx = 0; idx < side * side; ++idx) {
    p.a0.push_back(idx % side + 1);
    p.a1.push_back(idx / side + 1);
  }
  p.a0.push_back(0);
  p.a1.push_back(0);
  return p;
}

// The angle of slot j of a patch: slot j < n/2 reads the first coordinate with ladder[j], the
// rest the second with ladder[j - n/2] (float64, exact product in long double).
inline long double VisionAngle(const std::vector<double>& slot_freq, std::int64_t a0,
                               std::int64_t a1, std::size_t j) {
  const std::size_t half = slot_freq.size() / 2;
  const long double p = j < half ? a0 : a1;
  return p * static_cast<long double>(slot_freq[j]);
}

}  // namespace posenc_ref
