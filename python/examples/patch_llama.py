"""patch_llama.py: a Llama-family attention module, written as transformers'
modeling_llama.py writes it, run as is and then with ropeattn's drop-ins
patched in; outputs and gradients compared.

    make python && PYTHONPATH=python /usr/bin/python3 python/examples/patch_llama.py

The module below follows transformers' LlamaAttention: rotary_emb(x,
position_ids) -> (cos, sin), the module-level apply_rotary_pos_emb(q, k, cos,
sin) on q [B, H, S, D], and an attention function with
eager_attention_forward's signature.  Patching replaces those three names,
as one would patch transformers.models.llama.modeling_llama:

    modeling.apply_rotary_pos_emb = ropeattn.torch.apply_rotary_pos_emb
    modeling.eager_attention_forward = ropeattn.torch.eager_attention_forward
    model.rotary_emb = ropeattn.torch.RotaryEmbeddingModule(rope)

Prints each check and "patch_llama: ok: 3 of 3 checks passed"; exits 1
otherwise.  Needs PyTorch (Debian: python3-torch).
"""
import math
import sys
import types

import torch

import ropeattn
import ropeattn.torch as rt

DIM, H, HKV, D, B, S, THETA = 256, 8, 2, 32, 2, 24, 500000.0


# ---- transformers-style Llama attention (the code being patched) ---------

def rotate_half(x):
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, position_ids=None, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(x, n_rep):
    b, hkv, s, d = x.shape
    return x[:, :, None].expand(b, hkv, n_rep, s, d).reshape(b, hkv * n_rep, s, d)


def eager_attention_forward(module, query, key, value, attention_mask, scaling, dropout=0.0,
                            **kwargs):
    key, value = repeat_kv(key, module.n_rep), repeat_kv(value, module.n_rep)
    weights = torch.matmul(query, key.transpose(2, 3)) * scaling
    if attention_mask is not None:
        weights = weights + attention_mask
    weights = torch.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
    return torch.matmul(weights, value).transpose(1, 2).contiguous(), weights


class LlamaRotaryEmbedding(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.inv_freq = 1.0 / THETA ** (torch.arange(0, D, 2, dtype=torch.float) / D)

    @torch.no_grad()
    def forward(self, x, position_ids):
        freqs = position_ids[:, :, None].float() * self.inv_freq[None, None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class LlamaAttention(torch.nn.Module):
    def __init__(self, modeling):
        super().__init__()
        self.modeling, self.n_rep, self.scaling = modeling, H // HKV, D ** -0.5
        self.q_proj = torch.nn.Linear(DIM, H * D, bias=False)
        self.k_proj = torch.nn.Linear(DIM, HKV * D, bias=False)
        self.v_proj = torch.nn.Linear(DIM, HKV * D, bias=False)
        self.o_proj = torch.nn.Linear(H * D, DIM, bias=False)

    def forward(self, hidden_states, position_embeddings, attention_mask):
        shape = (*hidden_states.shape[:-1], -1, D)
        q = self.q_proj(hidden_states).view(shape).transpose(1, 2)
        k = self.k_proj(hidden_states).view(shape).transpose(1, 2)
        v = self.v_proj(hidden_states).view(shape).transpose(1, 2)
        cos, sin = position_embeddings
        q, k = self.modeling.apply_rotary_pos_emb(q, k, cos, sin)
        out, _ = self.modeling.eager_attention_forward(self, q, k, v, attention_mask,
                                                       scaling=self.scaling)
        return self.o_proj(out.reshape(*hidden_states.shape[:-1], -1))


def main():
    torch.manual_seed(0)
    modeling = types.SimpleNamespace(apply_rotary_pos_emb=apply_rotary_pos_emb,
                                     eager_attention_forward=eager_attention_forward)
    attn, rotary = LlamaAttention(modeling), LlamaRotaryEmbedding()
    x = torch.randn(B, S, DIM)
    position_ids = torch.arange(S).repeat(B, 1) + torch.tensor([[0], [7]])
    causal = torch.full((S, S), -math.inf).triu(1)[None, None].expand(B, 1, S, S)
    dy = torch.randn(B, S, DIM)

    def run(rotary_emb):
        attn.zero_grad()
        xg = x.clone().requires_grad_(True)
        y = attn(xg, rotary_emb(xg, position_ids), causal)
        (y * dy).sum().backward()
        return y.detach(), xg.grad, attn.q_proj.weight.grad.clone()

    y0, dx0, dwq0 = run(rotary)
    modeling.apply_rotary_pos_emb = rt.apply_rotary_pos_emb  # the patch
    modeling.eager_attention_forward = rt.eager_attention_forward
    rope = ropeattn.RotaryEmbedding(D, theta=THETA)
    y1, dx1, dwq1 = run(rt.RotaryEmbeddingModule(rope))

    def rel(a, b):
        return float((a - b).abs().max() / b.abs().max())

    # both float32, summed in other orders: a few 1e-7 of the largest
    checks = [("y: patched = transformers-style", rel(y1, y0), 1e-5),
              ("dL/dx: patched = transformers-style", rel(dx1, dx0), 1e-5),
              ("dL/dwq: patched = transformers-style", rel(dwq1, dwq0), 1e-5)]
    print(f"Llama-style attention (dim {DIM}, {H} heads, {HKV} kv heads, S {S}), "
          f"ropeattn {ropeattn.__version__}")
    passed = 0
    for name, error, limit in checks:
        passed += error <= limit
        print(f"  {'ok' if error <= limit else 'FAIL':5s} {name:40s} {error:.1e} "
              f"(limit {limit:g})")
    print(f"patch_llama: {'ok' if passed == len(checks) else 'FAILED'}: "
          f"{passed} of {len(checks)} checks passed")
    return 0 if passed == len(checks) else 1


if __name__ == "__main__":
    sys.exit(main())
