// M-RoPE position ids per segment (posenc/core/mrope_positions.h has the rules and sources).
#include "posenc/core/mrope_positions.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <string>

#include "posenc/core/error.h"
#include "util/format.h"

namespace posenc {
namespace {

constexpr std::int64_t kMaxId = std::numeric_limits<std::int32_t>::max();
constexpr std::string_view kLayoutHelp =
    "expected text:N, image:TxHxW or video:TxHxW@S, comma-separated";

std::string segment_label(std::size_t index, std::string_view text) {
  return "layout segment " + std::to_string(index + 1) + " (\"" + std::string(text) + "\")";
}

// A size of a segment: an integer >= 1 over the whole of `text`.
std::int64_t parse_size(std::string_view text, std::string_view what, const std::string& label) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value < 1) {
    throw Error(label + ": " + std::string(what) + " (" + std::string(text) +
                ") must be an integer >= 1");
  }
  return value;
}

MropeSegment parse_segment(std::string_view text, const std::string& label) {
  const std::size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    throw Error(label + ": no ':' after the segment kind; " + std::string(kLayoutHelp));
  }
  const std::string_view kind = text.substr(0, colon);
  std::string_view body = text.substr(colon + 1);
  MropeSegment s;
  try {
    s.kind = parse_mrope_segment_kind(kind);
  } catch (const Error& e) {
    throw Error(label + ": " + e.what());
  }
  if (s.kind == MropeSegmentKind::kText) {
    s.tokens = parse_size(body, "N", label);
    return s;
  }
  const std::size_t at = body.find('@');
  if (s.kind == MropeSegmentKind::kImage && at != std::string_view::npos) {
    throw Error(label + ": an image takes no @S (second_per_grid_ts is for videos)");
  }
  if (s.kind == MropeSegmentKind::kVideo) {
    if (at == std::string_view::npos) {
      throw Error(label +
                  ": a video needs @S, its second_per_grid_ts (temporal_patch_size / fps, 1.0 at "
                  "the processor's 2 fps): video:TxHxW@S");
    }
    const std::string_view seconds = body.substr(at + 1);
    double value = 0;
    const auto [end, ec] = std::from_chars(seconds.data(), seconds.data() + seconds.size(), value);
    if (seconds.empty() || ec != std::errc() || end != seconds.data() + seconds.size() ||
        !std::isfinite(value) || value <= 0) {
      throw Error(label + ": S (" + std::string(seconds) +
                  ") must be a finite number > 0 (second_per_grid_ts, seconds per temporal patch)");
    }
    s.second_per_grid_t = value;
    body = body.substr(0, at);
  }
  const std::string_view grid = body;
  std::int64_t* dims[3] = {&s.t, &s.h, &s.w};
  const char* names[3] = {"T", "H", "W"};
  for (int i = 0; i < 3; ++i) {
    const std::size_t x = body.find('x');
    if ((i < 2) != (x != std::string_view::npos)) {
      throw Error(label + ": the grid (" + std::string(grid) +
                  ") must be TxHxW, three sizes in patches");
    }
    *dims[i] = parse_size(body.substr(0, x), names[i], label);
    body = i < 2 ? body.substr(x + 1) : std::string_view();
  }
  return s;
}

// Appends one block: T groups of H' x W' tokens, t = start + temporal[k], h = start + r, w = start + c.
void append_block(MropePositions& out, std::int64_t groups, std::int64_t rows, std::int64_t cols,
                  std::int64_t start, const std::vector<std::int64_t>& temporal) {
  for (std::int64_t k = 0; k < groups; ++k) {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t c = 0; c < cols; ++c) {
        out.ids[0].push_back(start + temporal[static_cast<std::size_t>(k)]);
        out.ids[1].push_back(start + r);
        out.ids[2].push_back(start + c);
      }
    }
  }
}

}  // namespace

std::string_view mrope_model_name(MropeModel model) {
  switch (model) {
    case MropeModel::kQwen2Vl:
      return "qwen2-vl";
    case MropeModel::kQwen25Vl:
      return "qwen2.5-vl";
    case MropeModel::kQwen3Vl:
      return "qwen3-vl";
    case MropeModel::kGlm4v:
      return "glm-4.1v";
  }
  return "?";
}

MropeModel parse_mrope_model(std::string_view name) {
  for (MropeModel m :
       {MropeModel::kQwen2Vl, MropeModel::kQwen25Vl, MropeModel::kQwen3Vl, MropeModel::kGlm4v}) {
    if (name == mrope_model_name(m)) return m;
  }
  throw Error("M-RoPE model (\"" + std::string(name) +
              "\") must be one of qwen2-vl, qwen2.5-vl, qwen3-vl, glm-4.1v");
}

std::string_view mrope_segment_kind_name(MropeSegmentKind kind) {
  switch (kind) {
    case MropeSegmentKind::kText:
      return "text";
    case MropeSegmentKind::kImage:
      return "image";
    case MropeSegmentKind::kVideo:
      return "video";
  }
  return "?";
}

MropeSegmentKind parse_mrope_segment_kind(std::string_view name) {
  for (MropeSegmentKind k :
       {MropeSegmentKind::kText, MropeSegmentKind::kImage, MropeSegmentKind::kVideo}) {
    if (name == mrope_segment_kind_name(k)) return k;
  }
  throw Error("unknown segment kind \"" + std::string(name) + "\"; " + std::string(kLayoutHelp));
}

std::string_view mrope_rule_name(MropeRule rule) {
  return rule == MropeRule::kHf45 ? "hf-4.5" : "hf-5.3";
}

MropeRule parse_mrope_rule(std::string_view name) {
  if (name == "hf-4.5") return MropeRule::kHf45;
  if (name == "hf-5.3") return MropeRule::kHf53;
  throw Error("--rule (\"" + std::string(name) +
              "\") must be hf-4.5 (transformers <= 4.57: next text at max + 1) or hf-5.3 (the "
              "v5 walk: next text at block start + max(H', W'))");
}

std::vector<MropeSegment> parse_mrope_layout(std::string_view text) {
  if (text.empty()) throw Error("--layout (\"\") must not be empty; " + std::string(kLayoutHelp));
  std::vector<MropeSegment> layout;
  std::size_t begin = 0;
  for (;;) {
    const std::size_t comma = text.find(',', begin);
    const std::string_view item =
        text.substr(begin, comma == std::string_view::npos ? text.npos : comma - begin);
    const std::string label = segment_label(layout.size(), item);
    if (item.empty()) throw Error(label + ": empty segment; " + std::string(kLayoutHelp));
    layout.push_back(parse_segment(item, label));
    if (comma == std::string_view::npos) break;
    begin = comma + 1;
  }
  return layout;
}

std::string mrope_segment_text(const MropeSegment& s) {
  std::string out = std::string(mrope_segment_kind_name(s.kind)) + ":";
  if (s.kind == MropeSegmentKind::kText) return out + std::to_string(s.tokens);
  out += std::to_string(s.t) + "x" + std::to_string(s.h) + "x" + std::to_string(s.w);
  if (s.kind == MropeSegmentKind::kVideo) out += "@" + detail::shortest(s.second_per_grid_t);
  return out;
}

std::string mrope_layout_text(std::span<const MropeSegment> layout) {
  std::string out;
  for (const MropeSegment& s : layout) out += (out.empty() ? "" : ",") + mrope_segment_text(s);
  return out;
}

MropePositions mrope_positions(std::span<const MropeSegment> layout, const MropeVision& vision,
                               MropeRule rule) {
  const std::int64_t m = vision.spatial_merge_size;
  if (m < 1) {
    throw Error("spatial_merge_size (" + std::to_string(m) + ") must be an integer >= 1");
  }
  if (vision.model == MropeModel::kQwen25Vl &&
      !(std::isfinite(vision.tokens_per_second) && vision.tokens_per_second > 0)) {
    throw Error("tokens_per_second (" + detail::num(vision.tokens_per_second) +
                ") must be a finite number > 0");
  }
  if (layout.empty()) throw Error("the layout has no segments; " + std::string(kLayoutHelp));

  // Check every segment and the total before allocating.
  std::int64_t total = 0;
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const MropeSegment& s = layout[i];
    const std::string label = segment_label(i, mrope_segment_text(s));
    std::int64_t tokens = 0;
    if (s.kind == MropeSegmentKind::kText) {
      if (s.tokens < 1) throw Error(label + ": N (" + std::to_string(s.tokens) + ") must be >= 1");
      tokens = s.tokens;
    } else {
      const std::pair<const char*, std::int64_t> dims[3] = {{"T", s.t}, {"H", s.h}, {"W", s.w}};
      for (const auto& [name, v] : dims) {
        if (v < 1) {
          throw Error(label + ": " + name + " (" + std::to_string(v) + ") must be >= 1");
        }
      }
      for (const auto& [name, v] : {dims[1], dims[2]}) {
        if (v % m != 0) {
          throw Error(label + ": " + name + " (" + std::to_string(v) +
                      ") must be a multiple of spatial_merge_size (" + std::to_string(m) +
                      "): the vision tower merges " + std::to_string(m) + "x" + std::to_string(m) +
                      " patches into one token, so T*H*W/" + std::to_string(m * m) +
                      " tokens must be whole rows of merged patches");
        }
      }
      if (s.kind == MropeSegmentKind::kVideo &&
          !(std::isfinite(s.second_per_grid_t) && s.second_per_grid_t > 0)) {
        throw Error(label + ": S (" + detail::num(s.second_per_grid_t) +
                    ") must be a finite number > 0");
      }
      // Each factor is checked against the cap first, so the product cannot overflow.
      const std::int64_t rows = s.h / m, cols = s.w / m;
      if (s.t > kMaxMropeTokens || rows > kMaxMropeTokens || cols > kMaxMropeTokens ||
          s.t * rows > kMaxMropeTokens || s.t * rows * cols > kMaxMropeTokens) {
        tokens = kMaxMropeTokens + 1;
      } else {
        tokens = s.t * rows * cols;
      }
    }
    if (tokens > kMaxMropeTokens - total) {
      throw Error(label + ": the layout reaches more than " + std::to_string(kMaxMropeTokens) +
                  " tokens (kMaxMropeTokens)");
    }
    total += tokens;
  }

  MropePositions out;
  for (auto& axis : out.ids) axis.reserve(static_cast<std::size_t>(total));
  std::int64_t max_id = -1;  // hf-4.5: the next start is max_id + 1
  std::int64_t running = 0;  // hf-5.3: current_pos
  for (std::size_t i = 0; i < layout.size(); ++i) {
    const MropeSegment& s = layout[i];
    const auto start_here = [&] { return rule == MropeRule::kHf45 ? max_id + 1 : running; };
    const auto check = [&](std::int64_t highest) {
      if (highest > kMaxId) {
        throw Error(segment_label(i, mrope_segment_text(s)) + ": position ids reach " +
                    std::to_string(highest) + ", past int32 (" + std::to_string(kMaxId) + ")");
      }
    };
    if (s.kind == MropeSegmentKind::kText) {
      const std::int64_t start = start_here();
      check(start + s.tokens - 1);
      for (std::int64_t j = 0; j < s.tokens; ++j) {
        for (auto& axis : out.ids) axis.push_back(start + j);
      }
      max_id = std::max(max_id, start + s.tokens - 1);
      running = start + s.tokens;
      continue;
    }
    const std::int64_t rows = s.h / m, cols = s.w / m;
    const bool video = s.kind == MropeSegmentKind::kVideo;
    const bool per_frame =
        video && (vision.model == MropeModel::kQwen3Vl || vision.model == MropeModel::kGlm4v);
    // Temporal offsets per group k, before adding the block start.
    const std::int64_t groups = per_frame ? 1 : s.t;
    std::vector<std::int64_t> temporal(static_cast<std::size_t>(groups));
    for (std::int64_t k = 0; k < groups; ++k) {
      double tk = static_cast<double>(k);
      if (vision.model == MropeModel::kQwen25Vl && video) {
        tk = std::trunc(static_cast<double>(k) * std::trunc(s.second_per_grid_t) *
                        vision.tokens_per_second);
      } else if (vision.model == MropeModel::kQwen25Vl && rule == MropeRule::kHf45) {
        tk = 0;  // 4.57: second_per_grid_t = 0 for images
      }
      if (!(tk <= static_cast<double>(kMaxId))) {
        throw Error(segment_label(i, mrope_segment_text(s)) + ": the temporal id of group " +
                    std::to_string(k) + " (" + detail::num(tk) + ") is past int32 (" +
                    std::to_string(kMaxId) + ")");
      }
      temporal[static_cast<std::size_t>(k)] = static_cast<std::int64_t>(tk);
    }
    for (std::int64_t frame = 0; frame < (per_frame ? s.t : 1); ++frame) {
      const std::int64_t start = start_here();
      const std::int64_t highest = start + std::max({temporal.back(), rows - 1, cols - 1});
      check(highest);
      append_block(out, groups, rows, cols, start, temporal);
      max_id = std::max(max_id, highest);
      running = start + std::max(rows, cols);
    }
  }
  out.rope_deltas = max_id + 1 - total;
  return out;
}

std::array<std::int64_t, 3> mrope_decode_position(std::int64_t cache_position,
                                                  std::int64_t rope_deltas) {
  std::int64_t p = 0;
  if (cache_position < 0 || __builtin_add_overflow(cache_position, rope_deltas, &p) || p < 0) {
    throw Error("decode position: cache position (" + std::to_string(cache_position) +
                ") + rope_deltas (" + std::to_string(rope_deltas) +
                ") must be a position >= 0 within int64");
  }
  return {p, p, p};
}

std::optional<std::int64_t> mrope_first_difference(const MropePositions& a,
                                                   const MropePositions& b) {
  const std::int64_t n = std::min(a.tokens(), b.tokens());
  for (std::int64_t j = 0; j < n; ++j) {
    const auto u = static_cast<std::size_t>(j);
    for (int axis = 0; axis < 3; ++axis) {
      if (a.ids[axis][u] != b.ids[axis][u]) return j;
    }
  }
  if (a.tokens() != b.tokens()) return n;
  return std::nullopt;
}

}  // namespace posenc
