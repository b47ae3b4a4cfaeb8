#!/usr/bin/env python3
"""Writes the seed corpus of fuzz_gguf (fuzz/corpus/gguf/): small GGUF files, one per RoPE setup
the mapping knows, written from the format description (ggml's gguf.h). Run from fuzz/:

    python3 make_gguf_corpus.py
"""
import os
import struct

U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
FMT = {U8: '<B', I8: '<b', U16: '<H', I16: '<h', U32: '<I', I32: '<i', F32: '<f', BOOL: '<B',
       U64: '<Q', I64: '<q', F64: '<d'}


def string(s):
    b = s.encode()
    return struct.pack('<Q', len(b)) + b


def value(t, v):
    if t == STR:
        return string(v)
    if t == ARR:
        et, items = v
        return struct.pack('<IQ', et, len(items)) + b''.join(value(et, x) for x in items)
    return struct.pack(FMT[t], v)


def gguf(kvs, tensors=(), version=3, alignment=32):
    out = b'GGUF' + struct.pack('<IQQ', version, len(tensors), len(kvs))
    for key, t, v in kvs:
        out += string(key) + struct.pack('<I', t) + value(t, v)
    data = b''
    for name, floats in tensors:
        offset = len(data)
        out += string(name) + struct.pack('<I', 1) + struct.pack('<Q', len(floats))
        out += struct.pack('<IQ', 0, offset)
        data += struct.pack('<%df' % len(floats), *floats)
        data += b'\0' * (-len(data) % alignment)
    if tensors:
        out += b'\0' * (-len(out) % alignment)
    return out + data


def dims(arch, embd, heads, rot, ctx):
    return [('general.architecture', STR, arch), (arch + '.context_length', U32, ctx),
            (arch + '.embedding_length', U32, embd), (arch + '.attention.head_count', U32, heads),
            (arch + '.rope.dimension_count', U32, rot), (arch + '.rope.freq_base', F32, 10000.0)]


SEEDS = {
    'llama-plain.gguf': gguf(dims('llama', 64, 8, 8, 512)),
    'llama-v2-linear.gguf': gguf(dims('llama', 64, 8, 8, 512) + [
        ('llama.rope.scaling.type', STR, 'linear'), ('llama.rope.scaling.factor', F32, 4.0)], version=2),
    'llama3-rope-freqs.gguf': gguf(dims('llama', 64, 8, 8, 4096), [('rope_freqs.weight', [1.0, 1.5, 4.0, 8.0])]),
    'qwen2-yarn.gguf': gguf(dims('qwen2', 64, 4, 16, 32768) + [
        ('qwen2.rope.scaling.type', STR, 'yarn'), ('qwen2.rope.scaling.factor', F32, 4.0),
        ('qwen2.rope.scaling.original_context_length', U32, 8192),
        ('qwen2.rope.scaling.yarn_ext_factor', F32, 1.0), ('qwen2.rope.scaling.yarn_attn_factor', F32, 1.0),
        ('qwen2.rope.scaling.yarn_beta_fast', F32, 32.0), ('qwen2.rope.scaling.yarn_beta_slow', F32, 1.0),
        ('qwen2.rope.scaling.attn_factor', F32, 1.0), ('qwen2.rope.scaling.finetuned', BOOL, 1)]),
    'deepseek2-yarn.gguf': gguf(dims('deepseek2', 128, 4, 16, 163840) + [
        ('deepseek2.attention.key_length', U32, 24), ('deepseek2.rope.scaling.type', STR, 'yarn'),
        ('deepseek2.rope.scaling.factor', F32, 40.0),
        ('deepseek2.rope.scaling.original_context_length', U32, 4096),
        ('deepseek2.rope.scaling.yarn_log_multiplier', F32, 0.0707)]),
    'phi3-longrope.gguf': gguf(dims('phi3', 64, 4, 16, 131072) + [
        ('phi3.rope.scaling.original_context_length', U32, 4096),
        ('phi3.rope.scaling.attn_factor', F32, 1.19)],
        [('rope_factors_long.weight', [1.0, 2.0, 8.0, 16.0, 24.0, 30.0, 31.0, 32.0]),
         ('rope_factors_short.weight', [1.0, 1.0, 1.1, 1.2, 1.5, 2.0, 2.5, 3.0])]),
    'gptneox-partial.gguf': gguf(dims('gptneox', 96, 4, 6, 2048)),
    'qwen2vl-mrope.gguf': gguf(dims('qwen2vl', 64, 4, 16, 32768) + [
        ('qwen2vl.rope.dimension_sections', ARR, (I32, [2, 3, 3, 0]))]),
    'clip-qwen2vl-vision.gguf': gguf([
        ('general.architecture', STR, 'clip'), ('clip.has_vision_encoder', BOOL, 1),
        ('clip.projector_type', STR, 'qwen2vl_merger'), ('clip.vision.embedding_length', U32, 64),
        ('clip.vision.attention.head_count', U32, 4), ('clip.vision.image_size', U32, 56),
        ('clip.vision.patch_size', U32, 14), ('clip.vision.spatial_merge_size', U32, 2)]),
    'clip-llama4-vision.gguf': gguf([
        ('general.architecture', STR, 'clip'), ('clip.has_vision_encoder', BOOL, 1),
        ('clip.vision.projector_type', STR, 'llama4'), ('clip.vision.embedding_length', U32, 64),
        ('clip.vision.attention.head_count', U32, 2), ('clip.vision.image_size', U32, 56),
        ('clip.vision.patch_size', U32, 14)]),
    'qwen3vl-imrope.gguf': gguf(dims('qwen3vl', 64, 4, 16, 32768) + [
        ('qwen3vl.rope.dimension_sections', ARR, (I32, [3, 2, 2, 1]))]),
    'every-type.gguf': gguf(dims('llama', 64, 8, 8, 512) + [
        ('t.u8', U8, 1), ('t.i8', I8, -1), ('t.u16', U16, 2), ('t.i16', I16, -2), ('t.u32', U32, 3),
        ('t.i32', I32, -3), ('t.f32', F32, 0.5), ('t.bool', BOOL, 0), ('t.str', STR, 'x'),
        ('t.u64', U64, 4), ('t.i64', I64, -4), ('t.f64', F64, 0.25),
        ('t.strs', ARR, (STR, ['a', 'bc'])), ('t.nested', ARR, (ARR, [(U8, [1, 2]), (STR, ['z'])])),
        ('general.alignment', U32, 64)], [('x.weight', [1.0, 2.0])], alignment=64),
}

if __name__ == '__main__':
    os.makedirs('corpus/gguf', exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join('corpus/gguf', name), 'wb') as f:
            f.write(data)
