"""ropeattn.transformers: "ropeattn" as a transformers attention backend.

    import ropeattn.transformers              # registers "ropeattn"
    model = AutoModelForCausalLM.from_pretrained(path, attn_implementation="ropeattn")

register(context=None) registers it explicitly (context: a ropeattn.Context
for every call; None: torch.get_num_threads() threads at each call).  Two
entries go into transformers' registries under "ropeattn":
  - AttentionInterface: ropeattn.torch.eager_attention_forward, which runs
    each attention layer's core (q, k, v after RoPE and the cache) through
    the library, forward and backward, on CPU tensors (float32, float16,
    bfloat16; output in query's dtype).
  - AttentionMaskInterface: mask(), which hands every layer a Mask instead
    of a 4-D tensor: where the call's queries and keys sit in the sequence
    (the cache's offsets: a sliding-window layer's cache holds only its last
    tokens), the 2-D padding mask, and transformers' own boolean mask for
    the call (sdpa_mask's).  Each layer call finds the library's masks
    (causal, window, chunk, padding, documents from position_ids'
    restarts) that equal transformers' mask on every real query row, and
    raises UnsupportedError naming the difference when none does.  Rows
    of padding queries are 0, as transformers' flash paths give them (its
    sdpa path gives 0 to left padding; its eager path a mean of v).
A model whose config asks for what the library lacks (is_causal False,
bidirectional attention, cross attention, ALiBi, output_attentions) is
refused when the model is built with attn_implementation="ropeattn" (or
set to it: set_attn_implementation), naming the feature; what only a call
shows (a module's is_causal, another mask, position_bias) is refused at
the first forward.
"""
import functools

import torch
from transformers import AttentionInterface, PreTrainedModel
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from ._ropeattn import Context, UnsupportedError
from .torch import Block, eager_attention_forward

NAME = "ropeattn"

# config attributes whose value the library cannot honour: (attribute, the
# value that is refused, the feature's name)
_REFUSED_CONFIG = (
    ("is_causal", False, "is_causal=False (bidirectional attention)"),
    ("use_bidirectional_attention", True, "use_bidirectional_attention (bidirectional "
                                          "attention)"),
    ("is_encoder_decoder", True, "an encoder-decoder model (cross attention)"),
    ("add_cross_attention", True, "add_cross_attention (cross attention)"),
    ("alibi", True, "alibi (ALiBi position biases)"),
    ("output_attentions", True, "output_attentions (the library returns no attention "
                                "weights)"),
)


def check_config(config):
    """Raises UnsupportedError naming the first feature of config (a
    transformers PretrainedConfig, its sub-configs included) that the
    backend cannot run as transformers does."""
    for attribute, refused, feature in _REFUSED_CONFIG:
        if getattr(config, attribute, None) is refused:
            raise UnsupportedError(f'attn_implementation="{NAME}": {feature} is not supported '
                                   f"({type(config).__name__})")
    for key in getattr(config, "sub_configs", {}):
        sub = getattr(config, key, None)
        if sub is not None:
            check_config(sub)


def _checked(check):
    """PreTrainedModel._check_and_adjust_attn_implementation, which
    transformers calls when a model is built and when its implementation
    is set, followed by check_config when the result is "ropeattn"."""
    @functools.wraps(check)
    def wrapper(self, *args, **kwargs):
        implementation = check(self, *args, **kwargs)
        if implementation == NAME:
            check_config(self.config)
        return implementation
    wrapper.ropeattn_checks = True
    return wrapper


class Mask:
    """The mask of one create_*_mask call under "ropeattn", for every layer
    that receives it: the positions of the call's first query (q_offset) and
    key (kv_offset, past a sliding-window cache's evicted tokens), kv_length,
    the 2-D padding mask (bool [B, >= kv_offset + kv_length] or None), the
    local size transformers gave (a sliding window or chunk), and
    transformers' boolean mask [B, 1, Sq, Sk] (True: seen).  Layers of one
    kind share a Mask: the Blocks found for a layer's arguments are kept."""

    def __init__(self, q_offset, kv_offset, kv_length, padding, local_size, allowed):
        self.q_offset, self.kv_offset, self.kv_length = q_offset, kv_offset, kv_length
        self.padding, self.local_size, self.allowed = padding, local_size, allowed
        self._found = {}

    def ropeattn_blocks(self, query, key, sliding_window, module, kwargs):
        """The Blocks (ropeattn.torch.Block) of one layer's call whose masks
        equal transformers' on every real query row; UnsupportedError when
        none does."""
        b, sq, sk = query.shape[0], query.shape[2], key.shape[2]
        if (sq, sk) != tuple(self.allowed.shape[-2:]) or b != self.allowed.shape[0]:
            raise UnsupportedError(f"attention_mask: made for {tuple(self.allowed.shape)} "
                                   f"but the layer has {b} rows, {sq} queries, {sk} keys")
        position_ids = kwargs.get("position_ids")
        hints = (sliding_window, position_ids is not None)
        if hints not in self._found:
            self._found[hints] = self._find(b, sq, sk, sliding_window, position_ids)
        return self._found[hints]

    def _find(self, b, sq, sk, sliding_window, position_ids):
        grid = _Grid(self, b, sq, sk)
        locals_ = [(sliding_window, None), (self.local_size, None), (None, self.local_size),
                   (None, None)]
        documents = [None] + ([] if position_ids is None else
                              [d for d in [_documents(position_ids, b, sq, sk, grid.seq)]
                               if d is not None])
        for window, chunk in dict.fromkeys(locals_):
            for docs in documents:
                if grid.matches(self.allowed[:, 0], window, chunk, docs):
                    return grid.blocks(window, chunk, docs)
        raise UnsupportedError(grid.difference(self.allowed[:, 0]))


class _Grid:
    """A call's query and key positions in a sequence of seq tokens, its
    padding as the library takes it, and the library's masks over them."""

    def __init__(self, mask, b, sq, sk):
        self.q_pos = mask.q_offset + torch.arange(sq)
        self.k_pos = mask.kv_offset + torch.arange(sk)
        need = max(mask.q_offset + sq, mask.kv_offset + sk)
        if mask.padding is None:
            self.real = torch.ones(b, need, dtype=torch.bool)
        else:
            if mask.padding.shape[-1] < mask.q_offset + sq:
                raise UnsupportedError(f"attention_mask: {mask.padding.shape[-1]} tokens, "
                                       f"fewer than the queries reach ({mask.q_offset + sq})")
            # keys past the 2-D mask are padding, as transformers pads it (a static cache)
            self.real = torch.nn.functional.pad(
                mask.padding.bool(), (0, max(0, need - mask.padding.shape[-1])))
        self.b, self.seq = b, self.real.shape[-1]

    def seen(self, window, chunk, docs):
        """The library's mask [B, Sq, Sk] (True: seen) for these options;
        docs: per-row document ids [B, seq] or None."""
        q, k = self.q_pos[:, None], self.k_pos[None, :]
        seen = (k <= q)[None] & self.real[:, self.k_pos][:, None, :]
        if window:
            seen = seen & (k > q - window)[None]
        if chunk:
            lead = (self.real.cumsum(-1) == 0).sum(-1)[:, None, None]
            seen = seen & (torch.div(k - lead, chunk, rounding_mode="floor") ==
                           torch.div(q - lead, chunk, rounding_mode="floor"))
        if docs is not None:
            seen = seen & (docs[:, self.q_pos][:, :, None] == docs[:, self.k_pos][:, None, :])
        return seen

    def matches(self, allowed, window, chunk, docs):
        """Whether the library's mask equals allowed [B, Sq, Sk] on every
        real query row (padding rows give 0)."""
        differ = self.seen(window, chunk, docs) ^ allowed
        return not bool((differ & self.real[:, self.q_pos][:, :, None]).any())

    def difference(self, allowed):
        """The message for a mask the library cannot form: the first element
        where transformers' differs from the plain causal and padding mask."""
        seen = self.seen(None, None, None)
        differ = (seen ^ allowed) & self.real[:, self.q_pos][:, :, None]
        b, i, j = (int(x) for x in differ.nonzero()[0])
        qp, kp = int(self.q_pos[i]), int(self.k_pos[j])
        if allowed[b, i, j] and kp > qp:
            what = ("lets a query see a later key (bidirectional attention, e.g. image "
                    "tokens)")
        else:
            what = "is none the library forms (causal, window, chunk, padding, documents)"
        return (f"attention_mask: transformers' mask {what}: row {b}, query at position {qp}, "
                f"key at position {kp}")

    def blocks(self, window, chunk, docs):
        """The Blocks for these options: one, or one per batch row when the
        rows' documents differ."""
        padding = None if bool(self.real.all()) else self.real.to(torch.uint8).numpy()
        q_start, k_start = int(self.q_pos[0]), int(self.k_pos[0])
        if docs is None or bool((docs == docs[:1]).all()):
            return [Block(slice(0, self.b), q_start, k_start, self.seq, window, chunk, padding,
                          None if docs is None else _cu_seqlens(docs[0]))]
        return [Block(slice(r, r + 1), q_start, k_start, self.seq, window, chunk,
                      None if padding is None else padding[r:r + 1], _cu_seqlens(docs[r]))
                for r in range(self.b)]


def _documents(position_ids, b, sq, sk, seq):
    """Document ids [B, seq] where position_ids [B or 1, S] restart (each
    step other than +1 begins a document: transformers'
    find_packed_sequence_indices), for a call of every token (sq = sk =
    seq); None otherwise or when there is one document per row."""
    if position_ids.dim() != 2 or position_ids.shape[-1] != sq or not sq == sk == seq:
        return None
    pos = position_ids.expand(b, -1)
    steps = torch.diff(pos, prepend=pos[:, :1] - 1, dim=-1)
    docs = (steps != 1).cumsum(-1)
    return docs if bool((docs[:, -1] > 0).any()) else None


def _cu_seqlens(docs):
    """cu_seqlens [n + 1] of one row's document ids [seq]."""
    starts = (torch.diff(docs) != 0).nonzero()[:, 0] + 1
    return torch.cat((torch.zeros(1, dtype=torch.long), starts,
                      torch.tensor([docs.shape[0]]))).numpy()


def mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
         attention_mask=None, local_size=None, use_vmap=False, device="cpu", **kwargs):
    """The AttentionMaskInterface function of "ropeattn": a Mask holding the
    call's geometry and transformers' boolean mask for it (sdpa_mask's, never
    skipped)."""
    allowed = sdpa_mask(batch_size=batch_size, q_length=q_length, kv_length=kv_length,
                        q_offset=q_offset, kv_offset=kv_offset, mask_function=mask_function,
                        attention_mask=attention_mask, local_size=local_size,
                        allow_is_causal_skip=False, use_vmap=use_vmap, device=device)
    allowed = allowed.expand(batch_size, 1, q_length, kv_length).cpu()
    padding = None if attention_mask is None else attention_mask.cpu()
    return Mask(int(q_offset), int(kv_offset), int(kv_length), padding, local_size, allowed)


def register(context=None):
    """Registers "ropeattn" in transformers' AttentionInterface and
    AttentionMaskInterface (again: the context of the last call), and the
    load-time check of a model's config.  context: a ropeattn.Context that
    every call runs on, or None: torch.get_num_threads() threads at each
    call.  The same bits for any thread count."""
    if context is not None and not isinstance(context, Context):
        raise TypeError(f"context: expected a ropeattn.Context or None, got "
                        f"{type(context).__name__}")
    function = functools.partial(eager_attention_forward, context=context)
    AttentionInterface.register(NAME, function)
    AttentionMaskInterface.register(NAME, mask)
    check = PreTrainedModel._check_and_adjust_attn_implementation
    if not getattr(check, "ropeattn_checks", False):
        PreTrainedModel._check_and_adjust_attn_implementation = _checked(check)


register()

__all__ = ["Mask", "check_config", "mask", "register"]
