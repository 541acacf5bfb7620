#!/usr/bin/env python3
"""Writes llama3.json, proportional.json and yarn.json: inv_freq tables as transformers computes them.

Run with a Python that has torch and transformers (the files record both versions); the tests
read only the JSON files. Each table is HF's float32 inv_freq (values written as doubles, exact),
computed by the model classes' own rotary embedding (LlamaRotaryEmbedding, Gemma4's
full-attention layers, GptOssRotaryEmbedding for YaRN with and without `truncate`). `torch_pow_pairs` lists the pairs whose unscaled 1 / b^(2i/denominator)
torch rounds differently from the correctly rounded float32 power ropejit takes
(docs/rope-math.md section 4): only there may ropejit's table differ, by one ulp.
"""
import json
import os

import numpy as np
import torch
import transformers
from transformers import LlamaConfig
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding
from transformers.models.gemma4.configuration_gemma4 import Gemma4TextConfig
from transformers.models.gemma4.modeling_gemma4 import Gemma4TextRotaryEmbedding
from transformers.models.gpt_oss.configuration_gpt_oss import GptOssConfig
from transformers.models.gpt_oss.modeling_gpt_oss import GptOssRotaryEmbedding

HERE = os.path.dirname(os.path.abspath(__file__))


def values(tensor):
    return [float(v) for v in tensor.to(torch.float32).numpy()]


def torch_pow_pairs(theta, denominator, pairs):
    """Pairs where torch's float32 1 / b^(2i/den) differs from the correctly rounded one."""
    exponents = torch.arange(0, 2 * pairs, 2, dtype=torch.int64).float() / denominator
    torch_inv = (1.0 / (theta ** exponents)).numpy()
    out = []
    for i in range(pairs):
        power = np.float32(float(np.float32(theta)) ** float(exponents[i]))
        if np.float32(np.float32(1) / power) != torch_inv[i]:
            out.append(i)
    return out


def llama3_tables():
    # name, rope_theta, head_dim, factor, low_freq_factor, high_freq_factor, O
    configs = [
        ("llama-3.1-8b", 500000.0, 128, 8.0, 1.0, 4.0, 8192),
        ("llama-3.2-1b", 500000.0, 64, 32.0, 1.0, 4.0, 8192),
        ("factor-32-d128", 500000.0, 128, 32.0, 1.0, 4.0, 8192),
        ("theta-1e4-O-4096", 10000.0, 128, 8.0, 1.0, 4.0, 4096),
        ("theta-1e6-d64-lf2-hf8", 1000000.0, 64, 16.0, 2.0, 8.0, 32768),
        ("odd-ratios-d128", 500000.0, 128, 3.3, 1.0, 3.0, 3000),
        ("odd-lf-half-d64", 500000.0, 64, 7.0, 0.5, 3.0, 8192),
    ]
    out = []
    for name, theta, head_dim, factor, low, high, original in configs:
        config = LlamaConfig(hidden_size=head_dim * 4, num_attention_heads=4, head_dim=head_dim,
                             max_position_embeddings=131072,
                             rope_parameters={"rope_type": "llama3", "rope_theta": theta, "factor": factor,
                                              "low_freq_factor": low, "high_freq_factor": high,
                                              "original_max_position_embeddings": original})
        rotary = LlamaRotaryEmbedding(config)
        out.append({"name": name, "rope_theta": theta, "head_dim": head_dim, "factor": factor,
                    "low_freq_factor": low, "high_freq_factor": high,
                    "original_max_position_embeddings": original,
                    "torch_pow_pairs": torch_pow_pairs(theta, head_dim, head_dim // 2),
                    "inv_freq": values(rotary.inv_freq)})
    return out


def proportional_tables():
    out = []
    for head_dim in (256, 512):
        for factor in (1.0, 8.0):
            full = {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}
            if factor != 1.0:
                full["factor"] = factor
            config = Gemma4TextConfig(global_head_dim=head_dim, rope_parameters={
                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}, "full_attention": full})
            rotary = Gemma4TextRotaryEmbedding(config)
            rope_angles = int(0.25 * head_dim // 2)
            out.append({"name": f"gemma-4-global-d{head_dim}-factor-{factor:g}", "rope_theta": 1000000.0,
                        "head_dim": head_dim, "partial_rotary_factor": 0.25, "factor": factor,
                        "max_position_embeddings": config.max_position_embeddings,
                        "torch_pow_pairs": torch_pow_pairs(1000000.0, head_dim, rope_angles),
                        "inv_freq": values(rotary.full_attention_inv_freq)})
    return out


def yarn_tables():
    # name, head_dim, rope_theta, factor, O, beta_fast, beta_slow, truncate, extra keys
    configs = [
        ("gpt-oss-20b", 64, 150000.0, 32.0, 4096, 32.0, 1.0, False, {}),
        ("gpt-oss-truncated", 64, 150000.0, 32.0, 4096, 32.0, 1.0, True, {}),
        ("d128-f4-untruncated", 128, 1000000.0, 4.0, 32768, 32.0, 1.0, False, {}),
        ("d128-f4-truncated", 128, 1000000.0, 4.0, 32768, 32.0, 1.0, True, {}),
        ("d64-mscale-untruncated", 64, 10000.0, 40.0, 4096, 32.0, 1.0, False, {"mscale": 1.0, "mscale_all_dim": 1.0}),
    ]
    out = []
    for name, head_dim, theta, factor, original, fast, slow, truncate, extra in configs:
        rope = {"rope_type": "yarn", "rope_theta": theta, "factor": factor, "original_max_position_embeddings": original,
                "beta_fast": fast, "beta_slow": slow, "truncate": truncate, **extra}
        config = GptOssConfig(head_dim=head_dim, num_attention_heads=8, num_key_value_heads=2,
                              max_position_embeddings=int(original * factor), rope_parameters=rope)
        rotary = GptOssRotaryEmbedding(config)
        out.append({"name": name, "head_dim": head_dim, "max_position_embeddings": config.max_position_embeddings,
                    "rope": rope, "attention_factor": float(rotary.attention_scaling),
                    "torch_pow_pairs": torch_pow_pairs(theta, head_dim, head_dim // 2),
                    "inv_freq": values(rotary.inv_freq)})
    return out


def write(name, tables):
    document = {"generated_by": "tests/data/freqs_golden/make_golden.py",
                "transformers": transformers.__version__, "torch": torch.__version__, "tables": tables}
    with open(os.path.join(HERE, name), "w") as f:
        json.dump(document, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    write("llama3.json", llama3_tables())
    write("proportional.json", proportional_tables())
    write("yarn.json", yarn_tables())
