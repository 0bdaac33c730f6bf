#!/usr/bin/env python3
"""A tiny random Qwen3-Embedding-shaped checkpoint and its golden embeddings from transformers.

usage: python3 make_embedding_fixture.py OUT_DIR

Writes into OUT_DIR (tests/fixtures/embedding/qwen3_embedding):
  config.json, model.safetensors  Qwen3Model (no LM head: the checkpoint's tensors have no "model." prefix,
                                  as Qwen/Qwen3-Embedding-* save them), bfloat16, 2 layers, hidden 64,
                                  vocabulary 8192 (the demo model's tokenizer, copied in by hand)
  modules.json, 1_Pooling/config.json, 2_Normalize  sentence-transformers' pipeline: last-token pooling
                                  (Qwen3-Embedding's), then L2 normalization
  golden.json                     for a few token-id inputs: transformers' last_hidden_state pooled by the
                                  last token and by the mean over tokens, each L2-normalized (float32
                                  forward of the bf16 weights, eager attention, CPU)
Weights: transformers' own init under a fixed seed, then every 1-D parameter (norm weights) perturbed by
N(0, 0.1) so no norm weight is exactly 1.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
import transformers
from transformers import Qwen3Config, Qwen3Model

SEED = 5150
VOCAB = 8192


def main():
    out = sys.argv[1]
    os.makedirs(os.path.join(out, "1_Pooling"), exist_ok=True)
    os.makedirs(os.path.join(out, "2_Normalize"), exist_ok=True)
    cfg = Qwen3Config(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16, max_position_embeddings=512,
                      rms_norm_eps=1e-6, rope_theta=1000000.0, tie_word_embeddings=True, attention_bias=False,
                      bos_token_id=8179, eos_token_id=8181, initializer_range=0.05)
    torch.manual_seed(SEED)
    model = Qwen3Model(cfg)
    with torch.no_grad():
        for _, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(torch.randn_like(p) * 0.1)
    model = model.to(torch.bfloat16)
    model.save_pretrained(out, safe_serialization=True)

    with open(os.path.join(out, "modules.json"), "w") as f:
        json.dump([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                   {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                   {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}],
                  f, indent=2)
    with open(os.path.join(out, "1_Pooling", "config.json"), "w") as f:
        json.dump({"word_embedding_dimension": 64, "pooling_mode_cls_token": False, "pooling_mode_mean_tokens": False,
                   "pooling_mode_max_tokens": False, "pooling_mode_mean_sqrt_len_tokens": False,
                   "pooling_mode_weightedmean_tokens": False, "pooling_mode_lasttoken": True, "include_prompt": True},
                  f, indent=2)
    with open(os.path.join(out, "2_Normalize", ".keep"), "w") as f:
        f.write("")

    ref = Qwen3Model.from_pretrained(out, dtype=torch.float32, attn_implementation="eager").eval()
    g = torch.Generator().manual_seed(SEED + 1)
    inputs = [torch.randint(0, 8000, (n,), generator=g).tolist() for n in (1, 5, 17, 40)]
    last, mean = [], []
    with torch.no_grad():
        for ids in inputs:
            hs = ref(input_ids=torch.tensor([ids])).last_hidden_state[0].double()
            last.append(F.normalize(hs[-1], dim=0).tolist())
            mean.append(F.normalize(hs.mean(0), dim=0).tolist())
    with open(os.path.join(out, "golden.json"), "w") as f:
        json.dump({"inputs": inputs, "last_token": last, "mean": mean, "seed": SEED,
                   "transformers": transformers.__version__, "torch": torch.__version__}, f)
    print("wrote", out, "transformers", transformers.__version__, "torch", torch.__version__)
    print(sorted(os.listdir(out)))


if __name__ == "__main__":
    main()
