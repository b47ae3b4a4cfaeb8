"""Vision towers' 2D RoPE and M-RoPE text cos/sin, `hf` numerics bit for bit against torch.

torch computes what transformers computes, written here from the formulas of its modeling code
(not copied): Qwen2-VL's VisionRotaryEmbedding + rot_pos_emb (merge-block order), Qwen2.5-VL's
get_window_index, Llama4VisionRotaryEmbedding, and the text rotary embeddings of Qwen2-VL
(Qwen2VLRotaryEmbedding then apply_multimodal_rotary_pos_emb's section selection) and Qwen3-VL
(apply_interleaved_mrope before the cos). posenc's side is
`posenc vision-positions CONFIG --grid G [--window] --json --cos-sin --numerics hf` and
`posenc mrope-positions CONFIG --layout L --json --cos-sin --numerics hf`: the position ids must
be equal and every cos and sin value bit-identical. The float64 values (--numerics precise) must
be within 1e-5 (float32 angles of positions below 100) of torch's float32 ones.

The configs are written here from the published config.json files (named at each).

usage: vision_rope_torch_test.py POSENC
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

torch.set_num_threads(1)  # torch.cos depends on its thread count (docs/numerics.md)

# Qwen2-VL-7B-Instruct config.json (vision_config: embed_dim 1280, num_heads 16, patch_size 14,
# spatial_merge_size 2; text: rope_theta 1e6, head 3584 / 28 = 128, mrope_section [16, 24, 24]).
QWEN2_VL = {
    "model_type": "qwen2_vl", "hidden_size": 3584, "num_attention_heads": 28,
    "num_key_value_heads": 4, "rope_theta": 1000000.0, "max_position_embeddings": 32768,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vision_config": {"depth": 32, "embed_dim": 1280, "hidden_size": 3584, "num_heads": 16,
                      "mlp_ratio": 4, "patch_size": 14, "spatial_merge_size": 2,
                      "temporal_patch_size": 2},
}
# Qwen2.5-VL-7B-Instruct config.json (vision_config: hidden_size 1280, num_heads 16,
# window_size 112, fullatt_block_indexes [7, 15, 23, 31], tokens_per_second 2).
QWEN25_VL = {
    "model_type": "qwen2_5_vl", "hidden_size": 3584, "num_attention_heads": 28,
    "num_key_value_heads": 4, "rope_theta": 1000000.0, "max_position_embeddings": 128000,
    "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]},
    "vision_config": {"depth": 32, "hidden_size": 1280, "num_heads": 16, "intermediate_size": 3420,
                      "out_hidden_size": 3584, "patch_size": 14, "spatial_merge_size": 2,
                      "temporal_patch_size": 2, "tokens_per_second": 2, "window_size": 112,
                      "fullatt_block_indexes": [7, 15, 23, 31]},
}
# Qwen3-VL-8B-Instruct config.json (text_config: head_dim 128, rope_theta 5e6, mrope_section
# [24, 20, 20] interleaved; vision_config: hidden_size 1152, num_heads 16, patch_size 16).
QWEN3_VL = {
    "model_type": "qwen3_vl",
    "text_config": {"model_type": "qwen3_vl_text", "hidden_size": 4096, "num_attention_heads": 32,
                    "num_key_value_heads": 8, "head_dim": 128, "rope_theta": 5000000,
                    "max_position_embeddings": 262144,
                    "rope_scaling": {"mrope_interleaved": True, "mrope_section": [24, 20, 20],
                                     "rope_type": "default"}},
    "vision_config": {"depth": 27, "hidden_size": 1152, "num_heads": 16, "patch_size": 16,
                      "spatial_merge_size": 2, "temporal_patch_size": 2, "out_hidden_size": 4096},
}
# Llama-4-Scout-17B-16E config.json vision_config (hidden_size 1408, num_attention_heads 16,
# image_size 336, patch_size 14, rope_theta 10000).
LLAMA4 = {
    "model_type": "llama4",
    "vision_config": {"hidden_size": 1408, "num_attention_heads": 16, "image_size": 336,
                      "patch_size": 14, "rope_theta": 10000, "num_hidden_layers": 34,
                      "vision_output_dim": 4096, "pixel_shuffle_ratio": 0.5},
}


def run(posenc, args):
    r = subprocess.run([posenc] + args, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit("posenc " + " ".join(args) + " failed:\n" + r.stderr)
    return json.loads(r.stdout)


def same_bits(name, got, want):
    got = np.asarray(got, dtype=np.float64)
    want64 = want.double().numpy()
    if got.shape != want64.shape:
        sys.exit(f"{name}: shape {got.shape}, torch {want64.shape}")
    if not np.array_equal(got.astype(np.float32).view(np.uint32),
                          want.numpy().astype(np.float32).view(np.uint32)) or \
            not np.array_equal(got, got.astype(np.float32).astype(np.float64)):
        bad = np.argwhere(got != want64)
        i = tuple(bad[0])
        sys.exit(f"{name}: {len(bad)} values differ; first at {i}: posenc {got[i]!r}, "
                 f"torch {want64[i]!r}")


def near(name, got, want, tol=1e-6):
    err = np.max(np.abs(np.asarray(got) - want.double().numpy()))
    if not err <= tol:
        sys.exit(f"{name}: precise differs from torch's float32 by {err}")


# ---- transformers' vision towers, in torch --------------------------------------------------

def qwen_pos_ids(t, h, w, m):
    hpos = torch.arange(h).unsqueeze(1).expand(-1, w)
    hpos = hpos.reshape(h // m, m, w // m, m).permute(0, 2, 1, 3).flatten()
    wpos = torch.arange(w).unsqueeze(0).expand(h, -1)
    wpos = wpos.reshape(h // m, m, w // m, m).permute(0, 2, 1, 3).flatten()
    return torch.stack([hpos, wpos], dim=-1).repeat(t, 1)


def window_index(t, h, w, m, window_size, patch_size):
    ws = window_size // m // patch_size
    gh, gw = h // m, w // m
    index = torch.arange(t * gh * gw).reshape(t, gh, gw)
    pad_h, pad_w = ws - gh % ws, ws - gw % ws
    nh, nw = (gh + pad_h) // ws, (gw + pad_w) // ws
    padded = F.pad(index, (0, pad_w, 0, pad_h), "constant", -100)
    padded = padded.reshape(t, nh, ws, nw, ws).permute(0, 1, 3, 2, 4).reshape(-1)
    return padded[padded != -100]


def qwen_vision(head_dim, grid, m, window=None):
    t, h, w = grid
    dim = head_dim // 2
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
    pos_ids = qwen_pos_ids(t, h, w, m)
    seq = torch.arange(max(h, w), dtype=inv_freq.dtype)
    table = torch.outer(seq, inv_freq)
    rpe = table[pos_ids].flatten(1)
    if window is not None:
        unit = m * m
        idx = window_index(t, h, w, m, *window)
        rpe = rpe.reshape(rpe.shape[0] // unit, unit, -1)[idx, :, :].reshape(rpe.shape[0], -1)
        pos_ids = pos_ids.reshape(pos_ids.shape[0] // unit, unit, 2)[idx].reshape(-1, 2)
    emb = torch.cat((rpe, rpe), dim=-1)
    return pos_ids.T, emb.cos(), emb.sin()


def llama4_vision(cfg):
    idx = cfg["image_size"] // cfg["patch_size"]
    img_idx = torch.arange(idx ** 2, dtype=torch.int32).reshape(idx ** 2, 1)
    img_idx = torch.cat([img_idx, img_idx[:1]], dim=0)
    img_idx[-1, -1] = -2
    fx, fy = img_idx % idx, img_idx // idx
    freq_dim = cfg["hidden_size"] // cfg["num_attention_heads"] // 2
    rope_freq = 1.0 / (cfg["rope_theta"] ** (torch.arange(0, freq_dim, 2)[: (freq_dim // 2)].float()
                                             / freq_dim))
    freqs_x = ((fx + 1)[..., None] * rope_freq[None, None, :]).repeat_interleave(2, dim=-1)
    freqs_y = ((fy + 1)[..., None] * rope_freq[None, None, :]).repeat_interleave(2, dim=-1)
    freqs = torch.cat([freqs_x, freqs_y], dim=-1).float().contiguous()[..., ::2]
    freqs = freqs.masked_fill(img_idx.reshape(-1, 1, 1) < 0, 0)
    pos = torch.stack([(fx + 1).flatten(), (fy + 1).flatten()])
    pos[:, -1] = 0
    return pos, torch.cos(freqs).reshape(freqs.shape[0], -1), torch.sin(freqs).reshape(freqs.shape[0], -1)


# ---- transformers' text rotary embeddings, in torch -----------------------------------------

def text_cos_sin(position_ids, base, dim, sections, interleaved):
    inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
    pos = position_ids[:, None, :]  # [3, bs = 1, seq]
    inv_e = inv_freq[None, None, :, None].float().expand(3, 1, -1, 1)
    freqs = (inv_e @ pos[:, :, None, :].float()).transpose(2, 3)  # [3, 1, seq, dim / 2]
    if interleaved:
        ft = freqs[0]
        for d, offset in ((1, 1), (2, 2)):
            sl = slice(offset, sections[d] * 3, 3)
            ft[..., sl] = freqs[d, ..., sl]
        emb = torch.cat((ft, ft), dim=-1)
        return emb.cos()[0], emb.sin()[0]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos(), emb.sin()
    split = sections * 2
    cos = torch.cat([m[i % 3] for i, m in enumerate(cos.split(split, dim=-1))], dim=-1)
    sin = torch.cat([m[i % 3] for i, m in enumerate(sin.split(split, dim=-1))], dim=-1)
    return cos[0], sin[0]


def main():
    posenc = sys.argv[1]
    tmp = tempfile.mkdtemp(prefix="posenc_vision_torch_")
    paths = {}
    for name, cfg in (("qwen2_vl", QWEN2_VL), ("qwen2_5_vl", QWEN25_VL), ("qwen3_vl", QWEN3_VL),
                      ("llama4", LLAMA4)):
        paths[name] = os.path.join(tmp, name + ".json")
        with open(paths[name], "w") as f:
            json.dump(cfg, f)
    checked = 0
    # Vision towers: grids that divide, windows with partial edges, two temporal patches.
    cases = [("qwen2_vl", 80, (1, 16, 22), None), ("qwen2_vl", 80, (2, 8, 8), None),
             ("qwen2_5_vl", 80, (1, 36, 20), (112, 14)), ("qwen2_5_vl", 80, (2, 10, 18), (112, 14)),
             ("qwen2_5_vl", 80, (1, 64, 64), None), ("qwen3_vl", 72, (1, 24, 30), None)]
    for name, head_dim, grid, window in cases:
        base = ["vision-positions", paths[name], "--grid", "x".join(map(str, grid)), "--json",
                "--cos-sin"] + (["--window"] if window else [])
        j = run(posenc, base + ["--numerics", "hf"])
        pos, cos, sin = qwen_vision(head_dim, grid, 2, window)
        what = f"{name} {grid}{' window' if window else ''}"
        if j["position_ids"] != pos.tolist():
            sys.exit(f"{what}: position ids differ")
        same_bits(what + " cos", j["cos"], cos)
        same_bits(what + " sin", j["sin"], sin)
        near(what + " precise cos", run(posenc, base + ["--numerics", "precise"])["cos"], cos, 1e-5)
        checked += cos.numel()
    j = run(posenc, ["vision-positions", paths["llama4"], "--json", "--cos-sin", "--numerics", "hf"])
    pos, cos, sin = llama4_vision(LLAMA4["vision_config"])
    if j["position_ids"] != pos.tolist():
        sys.exit("llama4: position ids differ")
    same_bits("llama4 cos", j["cos"], cos)
    same_bits("llama4 sin", j["sin"], sin)
    checked += cos.numel()
    # Text M-RoPE: Qwen2-VL's contiguous sections and Qwen3-VL's interleave, text around images
    # and a video.
    for name, base, sections, interleaved in (("qwen2_vl", 1e6, [16, 24, 24], False),
                                              ("qwen2_5_vl", 1e6, [16, 24, 24], False),
                                              ("qwen3_vl", 5e6, [24, 20, 20], True)):
        layout = "text:7,image:1x12x16,text:5,video:3x8x8@1,text:4"
        j = run(posenc, ["mrope-positions", paths[name], "--layout", layout, "--json",
                         "--cos-sin", "--numerics", "hf"])
        ids = torch.tensor(j["position_ids"], dtype=torch.int64)
        cos, sin = text_cos_sin(ids, base, 128, sections, interleaved)
        same_bits(name + " text cos", j["cos"], cos)
        same_bits(name + " text sin", j["sin"], sin)
        p = run(posenc, ["mrope-positions", paths[name], "--layout", layout, "--json",
                         "--cos-sin", "--numerics", "precise"])
        near(name + " text precise cos", p["cos"], cos, 2e-5)
        checked += cos.numel()
    print(f"vision and M-RoPE cos/sin: {checked} values bit for bit with torch")


if __name__ == "__main__":
    main()
