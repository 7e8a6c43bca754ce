#!/usr/bin/env python3
"""unpadded_cases.py: ModernBERT's unpadded batches as packed documents.

    .venv-hf/bin/python tests/hf/unpadded_cases.py tests/hf_unpadded    (make hf-fixtures)

ModernBERT's flash-attention path ran a padded batch unpadded: the real
tokens of every row one after another, cu_seqlens at each row's end,
positions restarting.  Here transformers' ModernBertModel (its padded path:
the bidirectional mask, sliding within local_attention // 2, and padding)
runs a right-padded batch of 2 rows (5 and 7 real tokens of 7); layer L's
attention module (attn: Wqkv, RoPE, attention, Wo) is hooked, and its real
tokens' inputs and outputs are packed into one row of 12, as unpadding
does.  `ropeattn attention --positions pos.npy --packed` on that row must
give those outputs (tests/test_hf.sh).  Written:

    OUT_DIR/modernbert/config.json, model.safetensors   save_pretrained's
    OUT_DIR/modernbert/pos.npy      i64 [1, 12]: 0..4, 0..6 (the documents)
    OUT_DIR/modernbert/x<L>.npy     f32 [1, 12, hidden]: layer L's attn input, packed
    OUT_DIR/modernbert/y<L>.npy     f32 [1, 12, hidden]: its output, packed
    OUT_DIR/modernbert/case.json    versions, lengths, layers, float32 vs float64
for L 0 (global) and 1 (local: a window of 3 each way inside documents of 5
and 7; the unpadding must not let it cross a document's end).
"""
import json
import os
import sys

import numpy as np
import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import encoder_cases as e  # noqa: E402
import make_hf_cases as m  # noqa: E402

LENGTHS, S = (5, 7), 7


def main(out_dir):
    ropes = {"full_attention": {"rope_type": "default", "rope_theta": 1000.0},
             "sliding_attention": {"rope_type": "default", "rope_theta": 50.0}}
    config = transformers.ModernBertConfig(**dict(e.MODERNBERT, rope_parameters=ropes))
    gen = torch.Generator().manual_seed(4343)
    torch.manual_seed(4343)
    model = m.build(transformers.ModernBertModel, config)
    m.randomize(model, gen, None)
    mask = torch.zeros(len(LENGTHS), S, dtype=torch.int64)
    for b, n in enumerate(LENGTHS):
        mask[b, :n] = 1
    calls = {}
    hooks = [model.layers[L].attn.register_forward_hook(
        lambda mod, args, kwargs, out, L=L: calls.__setitem__(L, (args, kwargs, out)),
        with_kwargs=True) for L in (0, 1)]
    embeds = torch.randn(len(LENGTHS), S, config.hidden_size, generator=gen)
    with torch.no_grad():
        model(inputs_embeds=embeds, attention_mask=mask)
    for h in hooks:
        h.remove()
    d = os.path.join(out_dir, "modernbert")
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    real = mask.bool()
    pos = torch.cat([torch.arange(n) for n in LENGTHS])[None]
    m.save(d, "pos.npy", pos)
    info = {"lengths": list(LENGTHS), "seq": S, "layers": [0, 1], "family": "modernbert",
            "transformers": transformers.__version__, "torch": torch.__version__}
    for L, (args, kwargs, out) in calls.items():
        x = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        y = out[0] if isinstance(out, tuple) else out
        m.save(d, f"x{L}.npy", x[real][None])
        m.save(d, f"y{L}.npy", y[real][None])
        info[f"max_y{L}"] = float(y[real].abs().max())
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(info, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"modernbert unpadded: {info}")


if __name__ == "__main__":
    main(sys.argv[1])
