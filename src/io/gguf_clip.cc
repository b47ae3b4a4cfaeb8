// mmproj GGUF files -> a vision tower's RoPE. llama.cpp sources: tools/mtmd/clip-impl.h (key and
// projector names), clip.cpp (clip_model_loader::load_hparams: which keys are required, the
// per-projector defaults; build_rope_2d), models/qwen2vl.cpp and qwen3vl.cpp (ggml_rope_multi
// with GGML_ROPE_TYPE_VISION), models/llama4.cpp (build_rope_2d).
#include "io/gguf_clip.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <string>
#include <string_view>

#include "io/gguf_keys.h"
#include "posenc/core/error.h"
#include "posenc/core/ggml.h"
#include "posenc/core/vision_positions.h"

namespace posenc::gguf_detail {
namespace {

// The projector types whose tower posenc maps, with the tower they run. "qwen2.5o" is the legacy
// Qwen2.5-Omni name, which llama.cpp turns into qwen2.5vl_merger for the vision modality.
struct ClipTower {
  std::string_view projector;
  VisionTowerModel model;
};
constexpr ClipTower kClipTowers[] = {
    {"qwen2vl_merger", VisionTowerModel::kQwen2Vl},
    {"qwen2.5vl_merger", VisionTowerModel::kQwen25Vl},
    {"qwen2.5o", VisionTowerModel::kQwen25Vl},
    {"qwen3vl_merger", VisionTowerModel::kQwen3Vl},
    {"llama4", VisionTowerModel::kLlama4},
};

// clip-impl.h PROJECTOR_TYPE_NAMES: the other types llama.cpp knows. Their towers use learned
// position embeddings, no vision tower at all (audio), or a 2D RoPE posenc does not model.
constexpr std::string_view kOtherProjectors[] = {
    "mlp",         "mlp_norm",       "ldp",           "ldpv2",     "resampler",
    "adapter",     "step3vl",        "gemma3",        "gemma3nv",  "gemma3na",
    "gemma4v",     "gemma4a",        "phi4",          "idefics3",  "pixtral",
    "ultravox",    "internvl",       "qwen2a",        "qwen3a",    "glma",
    "voxtral",     "meralion",       "musicflamingo", "lfm2",      "kimivl",
    "paddleocr",   "lightonocr",     "cogvlm",        "janus_pro", "dots_ocr",
    "deepseekocr", "lfm2a",          "glm4v",         "youtuvl",   "yasa2",
    "kimik25",     "nemotron_v2_vl", "hunyuanocr",    "hunyuanvl", "parakeet",
};

std::string mapped_list() {
  std::string s;
  for (const ClipTower& t : kClipTowers) s += (s.empty() ? "" : ", ") + std::string(t.projector);
  return s;
}

bool mentions_rope(std::string key) {
  for (char& c : key) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return key.find("rope") != std::string::npos || key.find("rotary") != std::string::npos;
}

class ClipMapper : GgufKeys {
 public:
  explicit ClipMapper(const GgufFile& file) : GgufKeys(file) {}

  GgufModel map() {
    GgufModel out;
    ModelConfig& c = out.config;
    c.source = f_.source;
    c.model_type = "clip";
    if (const GgufValue* v = get("clip.has_vision_encoder")) {
      if (v->type != GgufType::kBool) wrong_type("clip.has_vision_encoder", *v, "bool");
      if (v->uint_value == 0) {
        fail(
            "clip.has_vision_encoder is false: the file has no vision tower, so no vision RoPE "
            "(an audio-only projector)");
      }
    } else {
      warn("clip.has_vision_encoder is not set: llama.cpp loads no vision tower from this file");
    }
    const VisionTowerModel model = read_projector();
    VisionTower tower;
    tower.model = model;
    tower.head_dim = read_head_dim();
    const auto image_size = required("clip.vision.image_size");
    const auto patch_size = required("clip.vision.patch_size");
    if (patch_size <= 0) {
      fail("clip.vision.patch_size (" + std::to_string(patch_size) + ") must be greater than 0");
    }
    tower.patch_size = patch_size;
    tower.image_size = image_size;
    tower.rope_theta = 10000.0;  // hard-coded by llama.cpp for every tower mapped here
    const std::int64_t side = image_size / patch_size;
    if (model == VisionTowerModel::kLlama4) {
      if (image_size % patch_size != 0 || side <= 0) {
        fail("clip.vision.image_size (" + std::to_string(image_size) +
             ") must be a positive multiple of clip.vision.patch_size (" +
             std::to_string(patch_size) + "): Llama 4's tile is S x S patches");
      }
    } else {
      const auto merge = integer("clip.vision.spatial_merge_size");
      tower.spatial_merge_size = merge.value_or(2);  // load_hparams' default for Qwen
      if (tower.spatial_merge_size <= 0) {
        fail("clip.vision.spatial_merge_size (" + std::to_string(tower.spatial_merge_size) +
             ") must be greater than 0");
      }
      if (!merge) note("clip.vision.spatial_merge_size is not set: llama.cpp's default 2");
    }
    c.spec = vision_rope_spec(tower);
    // The largest position: patches per side at image_size (Llama 4: 1..S, the class token 0).
    c.spec.max_position_embeddings = model == VisionTowerModel::kLlama4 ? side + 1 : side;
    set_ggml(out, tower);
    finish(out);
    return out;
  }

 private:
  void note(const std::string& what) { notes_.push_back(what); }

  std::int64_t required(const std::string& key) {
    const auto v = integer(key);
    if (!v) fail(key + " is missing; llama.cpp requires it (clip_model_loader::load_hparams)");
    return *v;
  }

  // clip.projector_type, else clip.vision.projector_type (files with several modalities).
  VisionTowerModel read_projector() {
    std::string key = "clip.projector_type";
    auto type = string(key);
    if (!type || type->empty()) {
      key = "clip.vision.projector_type";
      type = string(key);
    }
    if (!type || type->empty()) {
      fail(
          "clip.projector_type and clip.vision.projector_type are missing: llama.cpp then "
          "assumes \"mlp\" (LLaVA's CLIP tower: learned position embeddings, no RoPE); posenc "
          "maps the vision RoPE of projector types " +
          mapped_list());
    }
    for (const ClipTower& t : kClipTowers) {
      if (t.projector == *type) {
        note("projector " + *type + " (from " + key + "): the " +
             std::string(vision_tower_model_name(t.model)) + " vision tower");
        projector_ = *type;
        return t.model;
      }
    }
    const bool known = std::find(std::begin(kOtherProjectors), std::end(kOtherProjectors), *type) !=
                       std::end(kOtherProjectors);
    fail(key + " (\"" + *type + "\") " +
         (known ? "is a projector type whose tower posenc does not map (learned position "
                  "embeddings, no vision tower, or a 2D RoPE posenc does not model)"
                : "is not a projector type llama.cpp knows (clip-impl.h PROJECTOR_TYPE_NAMES)") +
         "; posenc maps the vision RoPE of projector types " + mapped_list());
  }

  std::int64_t read_head_dim() {
    const std::string e = "clip.vision.embedding_length";
    const std::string h = "clip.vision.attention.head_count";
    const auto n_embd = integer(e);
    const auto n_head = integer(h);
    if (!n_embd) fail(e + " is missing; it gives the tower's head_dim (with " + h + ")");
    if (!n_head) fail(h + " is missing; it gives the tower's head_dim (" + e + " / " + h + ")");
    if (*n_head <= 0) fail(h + " (" + std::to_string(*n_head) + ") must be greater than 0");
    const std::string dims =
        e + " (" + std::to_string(*n_embd) + ") / " + h + " (" + std::to_string(*n_head) + ")";
    if (*n_embd % *n_head != 0) fail(dims + " must divide evenly to give the head_dim");
    const std::int64_t head_dim = *n_embd / *n_head;
    if (head_dim <= 0 || head_dim % 4 != 0) {
      fail("head_dim " + dims + " = " + std::to_string(head_dim) +
           " must be a positive multiple of 4: the 2D RoPE rotates two axes of head_dim / 4 "
           "pairs each");
    }
    return head_dim;
  }

  // What the tower's graph passes to ggml. Qwen: ggml_rope_multi(..., d_head/2, {d_head/4 x 4},
  // GGML_ROPE_TYPE_VISION, 32768, 10000, 1, 0, 1, 32, 1) (sections 2 and 3 are never reached:
  // VISION rotates d_head/2 pairs). Llama 4: build_rope_2d, one ggml_rope_ext(mode 0, n_dims =
  // d_head/2, base 10000) per half of the head, x on the first and y on the second.
  void set_ggml(GgufModel& out, const VisionTower& tower) {
    GgmlRopeParams& g = out.ggml;
    const int quarter = static_cast<int>(tower.head_dim / 4);
    g.n_dims = 2 * quarter;
    g.freq_base = 10000.0f;
    if (tower.model == VisionTowerModel::kLlama4) {
      g.mode = GgmlMode::kNormal;
      g.beta_fast = 0.0f;
      g.beta_slow = 0.0f;
      out.config.llama_cpp_rope_type = "normal-2d";
      note("llama.cpp's build_rope_2d: ggml_rope_ext mode 0 (pairs (2i, 2i+1)), n_dims " +
           std::to_string(g.n_dims) +
           " (head_dim / 2), base 10000, once per half of the head: "
           "x = column + 1 on the first, y = row + 1 on the second, the class token (last) at 0");
    } else {
      g.mode = GgmlMode::kVision;
      g.n_ctx_orig = 32768;
      g.sections = {quarter, quarter, quarter, quarter};
      validate_head_dim(g, tower.head_dim);
      out.config.llama_cpp_rope_type = std::string(ggml_mode_name(g.mode));
      note("mode 24 (GGML_ROPE_TYPE_VISION, ggml_rope_multi): n_dims " + std::to_string(g.n_dims) +
           " (head_dim / 2), sections [" + std::to_string(quarter) + " x 4], pairs (i, i + " +
           std::to_string(g.n_dims) + "), positions [4, patches] (row, column, row, column)");
    }
    validate(g);
  }

  void finish(GgufModel& out) {
    ModelConfig& c = out.config;
    for (std::string& w : validate(c.spec)) warnings_.push_back(f_.source + ": " + w);
    for (const auto& [key, value] : f_.metadata) {
      if (read_.count(key) != 0) continue;
      if (mentions_rope(key)) {
        warn(key + " (" + value.describe() + ") is not a RoPE key posenc understands for " +
             "projector " + projector_ +
             "; it was not applied (llama.cpp hard-codes the tower's "
             "RoPE)");
      } else {
        c.ignored_keys.push_back(key);
      }
    }
    c.warnings.insert(c.warnings.end(), warnings_.begin(), warnings_.end());
    out.notes = std::move(notes_);
  }

  std::string projector_;
  std::vector<std::string> notes_;
};

}  // namespace

GgufModel clip_model(const GgufFile& file) { return ClipMapper(file).map(); }

}  // namespace posenc::gguf_detail
