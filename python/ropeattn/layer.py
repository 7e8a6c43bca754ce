"""Layer (one attention layer of a Hugging Face checkpoint, built by
libropeattn_hf as `ropeattn attention` builds it) and KVCache (its keys and
values for generation).

Shapes: B batch, S tokens, dim the model width (hidden_size), H query heads,
Hkv key/value heads, D head_dim.
"""
import json
import numbers
import os

import numpy as np

from . import _ropeattn
from ._arrays import (BF16, F16, F32, as_array, c_array, flag, index_copy, not_masked,
                      padding_mask)
from ._arrays import attn_mask as _attn_mask
from ._ropeattn import ArgumentError, DtypeError, FileError, UnsupportedError
from .rope import LAYOUTS, ROPE_TYPES, _check_key, _positions

_ROPE_TYPE_NAMES = {v: k for k, v in ROPE_TYPES.items()}
_LAYOUT_NAMES = {v: k for k, v in LAYOUTS.items()}
_CACHE_DTYPES = {"float32": F32, "float16": F16, "bfloat16": BF16, "int8": 16,
                 "float8_e4m3fn": 17}  # ra_dtype: RA_I8, RA_F8E4M3


_F32 = np.finfo(np.float32)


def _fp8_scale_ok(scale):
    """Whether scale, as float32, is a normal number with 448 scale finite:
    ra_kv_cache_set_scales' rule and the CLI's --cache-scale's (a subnormal
    scale keeps fewer bits, and is 0 where subnormals are flushed)."""
    if not isinstance(scale, numbers.Real) or isinstance(scale, bool):  # True ran as 1
        return False
    with np.errstate(over="ignore"):
        s = np.float32(float(scale))
    return _F32.tiny <= s <= _F32.max / np.float32(448)


def _cache_dtype(dtype, scale, what):
    """The name of a cache's or pool's dtype (a str or a NumPy dtype), with
    scale checked: only float8_e4m3fn has one (_fp8_scale_ok)."""
    try:
        name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    except TypeError:
        name = None
    if name not in _CACHE_DTYPES:
        raise DtypeError(f'dtype: expected "float32", "float16", "bfloat16", "int8" or '
                         f'"float8_e4m3fn", got {dtype!r}')
    if scale is not None and name != "float8_e4m3fn":
        raise ArgumentError(f'scale: only a "float8_e4m3fn" {what} has one (dtype {name})')
    if scale is not None and not _fp8_scale_ok(scale):
        raise ArgumentError(f"scale: expected a normal float32 (>= {_F32.tiny:g}) at most "
                            f"FLT_MAX / 448 (448 times it is the largest value stored), "
                            f"got {scale!r}")
    return name


def _checkpoint_files(path, config):
    """(weights, config) paths, each a str, bytes or os.PathLike as Python's
    file functions take them: a directory gives its model.safetensors, else
    its sharded index (model.safetensors.index.json), the order of
    transformers' from_pretrained, else its one .safetensors file; a file is
    the weights as it is (a .safetensors file or an index .json).  The
    config is config when given, else the config.json beside the weights
    (None where there is none)."""
    path = os.fsdecode(path)
    config = None if config is None else os.fsdecode(config)
    if not os.path.isdir(path):  # the library opens it, and says why not
        beside = os.path.join(os.path.dirname(path), "config.json")
        return path, config if config is not None or not os.path.isfile(beside) else beside
    weights = None
    for name in ("model.safetensors", "model.safetensors.index.json"):
        if os.path.isfile(os.path.join(path, name)):
            weights = os.path.join(path, name)
            break
    else:
        found = sorted(f for f in os.listdir(path) if f.endswith(".safetensors"))
        if len(found) != 1:
            raise FileError(f"{path}: no model.safetensors or model.safetensors.index.json, "
                            f"and {len(found)} other .safetensors files: give the file")
        weights = os.path.join(path, found[0])
    if config is None and os.path.isfile(os.path.join(path, "config.json")):
        config = os.path.join(path, "config.json")
    return weights, config


def _rope_keys(rope_parameters):
    """The keys of rope_parameters: a dict, its JSON text, or None."""
    if isinstance(rope_parameters, (str, bytes)):
        try:
            rope_parameters = json.loads(rope_parameters)
        except ValueError:
            return ()  # the library refuses it, naming the problem
    return rope_parameters if isinstance(rope_parameters, dict) else ()


def _json_scalar(value):
    """json.dumps' default: a NumPy scalar (np.float32(2.0), np.int64) as
    the Python number it holds."""
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} {value!r} is not a JSON value")


def _rope_text(rope_parameters):
    """rope_parameters as the JSON text the library reads: a dict dumped
    (NumPy scalars as numbers), a str as it is, bytes decoded as UTF-8,
    None as None; anything else, a value JSON has not (NaN, a set), or
    bytes not UTF-8, an ArgumentError naming rope_parameters (json.dumps
    raised TypeError naming a type, NaN became text the library found
    malformed, bytes or a list a TypeError naming nothing)."""
    try:
        if isinstance(rope_parameters, dict):
            return json.dumps(rope_parameters, allow_nan=False, default=_json_scalar)
        if isinstance(rope_parameters, bytes):
            return rope_parameters.decode("utf-8")
    except (TypeError, ValueError) as e:
        raise ArgumentError(f"rope_parameters: {e}") from None
    if rope_parameters is not None and not isinstance(rope_parameters, str):
        raise ArgumentError(f"rope_parameters: expected a dict, its JSON text or None, got "
                            f"{type(rope_parameters).__name__}")
    return rope_parameters


def _count(value, name, least):
    """An int option: None gives None, else an int >= least (int64: past it
    the extension raised OverflowError, naming no argument)."""
    if value is None:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or \
            not least <= value < 2 ** 63:
        raise ArgumentError(f"{name}: expected an integer >= {least} (int64) or None, "
                            f"got {value!r}")
    return int(value)


class Layer:
    """One attention layer of a Hugging Face checkpoint: LLaMA's Attention
    module (x -> q, k, v projections (+ biases) -> q/k norms -> RoPE ->
    causal grouped-query attention -> o projection), or DeepSeek's latent
    attention (config["kv_lora_rank"] > 0: keys and values from a latent of
    kv_lora_rank features a token, one rotated key shared by the heads), for
    every family the library reads (docs/FAMILIES.md's table), with its own
    copy of the weights: a bf16 or f16 checkpoint's projection matrices as
    stored (read in place, widened exactly as they are used), a block-FP8
    checkpoint's (quantization_config quant_method "fp8") dequantized at load
    into the config's torch_dtype as transformers does, the rest float32.
    Make one with Layer.from_pretrained.

      layer(x [B, S, dim] or [S, dim], positions=None, attention_mask=None,
            cache=None, context=None) -> y of x's shape, float32

    A Layer is read-only: any number of threads may call it at once (each
    with its own KVCache and Context).
    """

    _token_types = False  # from_pretrained(..., token_types=True): calls need token_type_ids

    def __init__(self, _layer, context=None, layer_index=None, paths=None, seq_len=None):
        # Layer.from_pretrained makes these; not for direct use.
        if not isinstance(_layer, _ropeattn.HFLayer):
            raise TypeError("Layer: use Layer.from_pretrained(path, layer=N)")
        self._layer = _layer
        self.context = context
        self.layer_index = layer_index
        self.paths = paths
        self._seq_len = seq_len  # from_pretrained's: a length fixed for every call
        self._config = _layer.config
        self._tensors = tuple(_layer.tensors())
        self._names = tuple(name for name, _ in self._tensors)

    @classmethod
    def from_pretrained(cls, path, layer=None, context=None, *, config=None, n_heads=None,
                        n_kv_heads=None, layout=None, max_position=None, n_tokens=None,
                        seq_len=None, position_ids=False, rope_parameters=None, theta=None,
                        max_position_embeddings=None, vision=False, token_types=False,
                        vision_windows=False):
        """Builds layer `layer` of a checkpoint, as
        `ropeattn attention --weights W --config C --layer N` does
        (ra_hf_checkpoint_open, ra_hf_config_open, ra_hf_layer_create).

          path: a checkpoint directory (config.json and model.safetensors,
            else a sharded model.safetensors.index.json, as transformers
            takes them), or a .safetensors file or index .json; a str,
            bytes or os.PathLike, as config.
          layer: the layer's number in the tensor names
            (model.layers.N.self_attn.*); None: the checkpoint holds one
            layer's tensors only.
          context: the ropeattn.Context the calls use unless given theirs
            (None: the default Context, as attention's).
          config: config.json's path; by default the one beside the
            weights, as transformers reads it.  With none there, the rope
            must be given (theta=, or rope_parameters with rope_theta), and
            n_heads, and layout= for Hugging Face names (the pairing is the
            family's): never theta 10000 by default.
          n_heads, n_kv_heads: override the config's head counts.
          layout: "half" or "interleaved" (None: the names' and family's:
            Hugging Face's q_proj names rotate halves, Meta's wq pairs).
          max_position: the largest position id the layer will be given
            (n_tokens: the tokens per sequence, positions 0 .. n_tokens - 1,
            stands for it), and seq_len: the sequence length a "dynamic" or
            "longrope" rope scales by (max_position + 1 unless given).
            Those two rope types need one of them (transformers recomputes
            them per forward; a Layer is for one length: build another for
            another).  Such a Layer refuses positions from max(that length,
            the config's original length) on, where transformers' frequencies
            differ, and a call (with or without a cache or pool) whose
            tokens reach a length with other frequencies than the Layer's
            (transformers forms them from each forward's length): give
            seq_len to fix the length for every call instead.  For the other
            types, max_position only sizes the cos/sin table (4096 rows when
            None; later positions are computed exactly, more slowly).
            A family with a sparse-attention indexer (deepseek_v32,
            glm_moe_dsa: index_topk; qwen4_exp: indexer_budget +
            indexer_compress_ratio - 1; minimax_m3_vl_text's sparse layers:
            index_topk_blocks * index_block_size) needs n_tokens or
            max_position, at most that many keys (the indexer keeps them
            all: the dense layer); a call where a query would see more
            keys is refused (UnsupportedError naming max_keys, the
            layer's config["max_keys"]).
          position_ids: True when the calls will give position ids rather
            than a start: Llama 4's NoPE layers, which scale q by each
            token's place in the sequence, are then refused.
          rope_parameters: a rope_scaling / rope_parameters dict (or its
            JSON text) replacing the config's; theta: the rope base;
            max_position_embeddings: the config's, replaced.
          vision: True: the attention layer `layer` of the checkpoint's
            vision encoder (vision_config: Pixtral, Qwen2-VL, Qwen2.5-VL,
            Llama 4; docs/FAMILIES.md "Vision encoders"), bidirectional,
            with its 2-D rope: its calls take (row, column) positions [S, 2]
            or [B, S, 2] and the images packed in a row as cu_seqlens.  The
            heads, layout and rope are vision_config's: n_heads, n_kv_heads,
            layout, seq_len and position_ids are refused with it.
          vision_windows: True (with vision): a Qwen2.5-VL window-attention
            layer (one not in vision_config's fullatt_block_indexes), which
            without it is refused (UnsupportedError naming vision_windows);
            True on any other layer: ArgumentError.  It states that the
            calls give what transformers' tower gives it: the patches in
            window order, their positions and the windows as cu_seqlens,
            all from ropeattn.vision_windows(path, grid_thw):
              w = ropeattn.vision_windows(path, grid_thw)
              y = layer(x[w.patch_index], positions=w.positions,
                        cu_seqlens=w.cu_window_seqlens)
            A call without cu_seqlens, or with a document longer than the
            largest window (config["max_document"]: (window_size //
            spatial_merge_size // patch_size)^2 spatial_merge_size^2
            patches; whole frames are a full layer's), is refused
            (ArgumentError naming max_document).
          token_types: True: a Gemma 3 layer (config.json's model_type
            "gemma3"; any other refused, UnsupportedError) whose calls take
            token_type_ids, image blocks attending both ways (transformers'
            Gemma3Model), which become the call's whole mask (with or
            without a cache); a call without them is text only, the
            layer's own causal mask and window (as transformers' decode
            steps, which get none).
        Raises FileError (an OSError) for a file that cannot be read,
        FormatError (a ValueError) for a malformed one, NotFoundError (a
        LookupError) for a missing tensor or key (a layer the checkpoint does
        not have), ArgumentError for an option out of range,
        UnsupportedError for attention ropeattn does not run (each with
        libropeattn_hf's message, naming the file, tensor or key).
        """
        position_ids, vision = flag(position_ids, "position_ids"), flag(vision, "vision")
        token_types = flag(token_types, "token_types")
        vision_windows = flag(vision_windows, "vision_windows")
        if theta is not None:
            _check_key("theta", theta)  # as RotaryEmbedding's: a number, never a bool
        weights, config = _checkpoint_files(path, config)
        if (config is None and theta is None and os.path.exists(weights) and
                "rope_theta" not in _rope_keys(rope_parameters)):  # a missing file: its error
            raise ArgumentError(f"no config.json beside {weights}: give config=, or the rope: "
                                f"theta= (or rope_parameters with rope_theta)")
        if layout is not None and layout not in LAYOUTS:
            raise ArgumentError(f'layout: expected "half", "interleaved" or None, '
                                f'got {layout!r}')
        rope_parameters = _rope_text(rope_parameters)
        options = {"layer": _count(layer, "layer", 0),
                   "n_heads": _count(n_heads, "n_heads", 1),
                   "n_kv_heads": _count(n_kv_heads, "n_kv_heads", 1),
                   "layout": None if layout is None else LAYOUTS[layout],
                   "max_position": _count(max_position, "max_position", 0),
                   "n_tokens": _count(n_tokens, "n_tokens", 1),
                   "seq_len": _count(seq_len, "seq_len", 1)}
        kwargs = {k: v for k, v in options.items() if v is not None}
        if max_position_embeddings is not None:
            kwargs["max_position_embeddings"] = _count(max_position_embeddings,
                                                       "max_position_embeddings", 1)
        if context is not None and not isinstance(context, _ropeattn.Context):
            raise TypeError(f"context: expected a ropeattn.Context or None, "
                            f"got {type(context).__name__}")
        hf = _ropeattn.HFLayer(weights, config, position_ids=position_ids,
                               rope_parameters=rope_parameters,
                               theta=None if theta is None else float(theta),
                               vision=vision, token_types=token_types,
                               vision_windows=vision_windows, **kwargs)
        made = cls(hf, context, options["layer"], (weights, config), options["seq_len"])
        made._token_types = token_types
        return made

    @property
    def config(self):
        """The layer as built (ra_layer_config): dim, n_heads, n_kv_heads,
        head_dim, window and chunk (0: none), softcap (0: none), scale (0:
        1/sqrt(head_dim)), no_rope, the q/k norms' settings (norm_eps,
        norm_whole, norm_head_weights, norm_layer, qk_l2_norm), clip_qkv,
        temperature_floor, _scale and _no_offset (Llama 4, Ministral 3),
        temperature_length and _power (q times (1 + (p + 1) / length) **
        power: Beam's NoPE layers; length 0: none),
        latent attention's
        kv_lora_rank (0: none), q_lora_rank, qk_nope_head_dim and
        v_head_dim (head_dim without latent attention), max_keys (the
        most keys a query may attend to, 0: no bound; a call past it raises
        UnsupportedError: DeepSeek sparse attention's index_topk),
        positions_are_slots (True: a call whose positions are not each
        token's index in its sequence, after a cache's tokens, raises
        UnsupportedError: MiniMax-M3's sparse layers), v_scale (v times
        it: MiMo-V2-Flash), norm_after_rope, clip_after_norm, v_norm,
        gated_output, gate_per_head and gate_softplus (the output gate's
        form), latent attention's q_latent_scale, kv_latent_scale (1: none)
        and q_b_raw_latent, non_causal (an encoder's: no causal mask),
        rope_values (True: RoPE on the values too, RoFormer's
        rotary_value), model_type, and rope: a dict
        of type and layout (names), head_dim, rotary_dim, theta, factor,
        original_max_position_embeddings, max_position_embeddings, seq_len,
        attention_factor, table_size, rotating_pairs (0: every pair turns;
        the proportional rope's).  A new dict each time."""
        c = dict(self._config)
        rope = dict(c["rope"])
        rope["type"] = _ROPE_TYPE_NAMES.get(rope["type"], rope["type"])
        rope["layout"] = _LAYOUT_NAMES.get(rope["layout"], rope["layout"])
        c["rope"] = rope
        c["model_type"] = self._layer.model_type
        return c

    @property
    def tensor_names(self):
        """The checkpoint tensors the layer was built from (weights, then
        biases, then q/k norms), a tuple of names."""
        return self._names

    @property
    def tensor_shapes(self):
        """{name: shape} of the tensors in tensor_names, as stored."""
        return dict(self._tensors)

    def __call__(self, x, positions=None, attention_mask=None, cache=None, context=None,
                 pool=None, ids=None, n_new=None, attn_mask=None, cu_seqlens=None,
                 token_type_ids=None):
        """y = the layer's Attention.forward(x), in inference mode.

          x: float32 [B, S, dim] or [S, dim] (batch 1), any strides (a
             C-contiguous, aligned array is read in place, others copied).
          positions: RoPE's position of each token: None (0 .. S-1; with a
             cache, the tokens cached before it: length .. length + S - 1),
             an int start, or integers
             [S] (every batch row) or [B, S] (position ids); for an M-RoPE
             layer (Qwen2-VL, Qwen2.5-VL, Qwen3-VL) also 3-D positions
             [3, S] or [3, B, S] (temporal, height, width).  The causal
             mask (and any window or chunk) follows token order, as in
             transformers.  An encoder's layer (config["non_causal"]:
             its config.json says so) has no causal mask, its window
             bounding both sides.
          attention_mask: None, or [B, S] ([S] for 2-D x) of 0/1 or bool,
             Hugging Face's attention_mask: 1 for a token, 0 for padding
             (left or right).  No token attends to padding, and a padding
             token's row of y is 0.  Not with a cache.
          attn_mask: None, or PyTorch SDPA's attn_mask over [B, n_heads,
             S, S] (any shape that broadcasts to it: [S, S], [B, 1, S, S],
             ...), bool (True: may attend) or additive float32 or float16,
             as ropeattn.attention takes it; combined with the layer's own
             masks and attention_mask.  Not with a cache or a pool.
          token_type_ids: None, or integers [B, S] ([S] for 2-D x), Gemma
             3's (1: an image token, any other value text), for a layer
             from from_pretrained(..., token_types=True): each run of 1s is
             an image block whose tokens see each other both ways, causal
             elsewhere; a sliding layer's window bounds only the keys
             before a query (a block may be longer), attention_mask's
             padding its keys, as transformers' create_masks_for_vision_model
             (ra_hf_token_type_mask).  With a cache, those of every token
             so far, [B, len(cache) + S], as transformers' generate() gives
             a prefill chunk (a block cut by a chunk's end: bidirectional
             within each chunk, the later one seeing the earlier part); its
             decode steps of text need none.  Not with attn_mask or a pool.
          cu_seqlens: None, or integers [n + 1]: 0, then where each of the n
             images (documents) packed in every row ends, the last S; no
             token attends across them (a vision encoder's packed images:
             Pixtral's block mask, Qwen2-VL's cu_seqlens).  Not with a
             cache or a pool.  A vision layer's positions (from_pretrained's
             vision) are each patch's (row, column), [S, 2] or [B, S, 2].
          cache: a KVCache made for this layer: the S tokens of each
             sequence are appended to it (keys rotated, in its dtype) and
             each attends over everything cached so far.  A prefill is an
             empty cache and S tokens; a decode step S = 1.  A prefill of N
             tokens equals a prefill of N - k and k decode steps to float32
             rounding (and to the cache dtype's).  A call that does not fit
             raises CacheFullError and changes nothing.
          pool, ids, n_new: serving from a KVPool made for this layer
             instead (continuous batching): row i of x [N, S, dim] holds
             n_new[i] (None: S; 0 allowed) new tokens of the pool's sequence
             ids[i] (N ids, each once), appended to its pages and attending
             over its tokens; y's rows past n_new[i] are 0.  A call that does
             not fit raises CacheFullError and changes nothing.
          context: a ropeattn.Context (None: the layer's, from
             from_pretrained).
        Returns y: float32 of x's shape, C-contiguous.  Computed in float32;
        the GIL is released while it runs.
        """
        if not isinstance(x, np.ndarray):
            raise DtypeError(f"x: expected a numpy.ndarray, got {type(x).__name__}")
        not_masked(x, "x")
        if x.dtype != np.float32:
            raise DtypeError(f"x: expected float32 (native byte order), got {x.dtype}")
        dim = self._config["dim"]
        if x.ndim not in (2, 3) or x.shape[-1] != dim or 0 in x.shape:
            raise ArgumentError(f"x: expected shape [B, S, {dim}] or [S, {dim}], "
                                f"got {x.shape}")
        x3 = c_array(x if x.ndim == 3 else x[None])
        b, s = x3.shape[:2]
        if context is None:
            context = self.context
        if cache is not None and pool is not None:
            raise ArgumentError("cache and pool: give one")
        if (pool is None) != (ids is None):
            raise ArgumentError("pool and ids: give both or neither")
        if n_new is not None and pool is None:
            raise ArgumentError("n_new: only with pool= (a cache takes every row's S tokens)")
        rows = ids
        if positions is None and (cache is not None or pool is not None):
            start, ids = -1, None  # continuing from the cache's or pool's lengths
        else:
            mrope = any(self._config["rope"]["mrope_section"])
            start, ids = _positions(positions, b, s, mrope, bool(self._config["rope"]["axial"]))
        if (ids is not None and self._config["temperature_floor"]
                and not self._config["temperature_no_offset"]):
            raise ArgumentError("positions: Llama 4's NoPE layers scale q by each token's "
                                "place in the sequence (attn_temperature_tuning), not by "
                                "position ids: give a start")
        y = np.empty(x3.shape, np.float32)
        if pool is not None:
            if not isinstance(pool, KVPool):
                raise TypeError(f"pool: expected a ropeattn.KVPool, got {type(pool).__name__}")
            if pool.layer is not self:
                raise ArgumentError("pool: made for another Layer")
            if token_type_ids is not None:
                raise UnsupportedError("token_type_ids: not with a pool (its calls take no mask)")
            if attn_mask is not None:
                raise UnsupportedError("attn_mask: not with a pool (its calls take none)")
            if cu_seqlens is not None:
                raise UnsupportedError("cu_seqlens: not with a pool")
            if attention_mask is not None:
                raise UnsupportedError("attention_mask: not with a pool (each sequence holds "
                                       "its own tokens: give n_new instead)")
            rows = _id_array(rows, b, "ids")
            n_new = None if n_new is None else _id_array(n_new, b, "n_new")
            self._check_length(lambda: [pool._pool.length(int(i)) for i in rows], start, ids, s,
                               n_new)
            _ropeattn.layer_forward_paged(self._layer, context, pool._pool, y, x3, rows, n_new,
                                          start, ids)
        elif cache is not None:
            if not isinstance(cache, KVCache):
                raise TypeError(f"cache: expected a ropeattn.KVCache, "
                                f"got {type(cache).__name__}")
            if cache.layer is not self:
                raise ArgumentError("cache: made for another Layer")
            whole = None
            if token_type_ids is not None:
                whole = self._token_type_mask(token_type_ids, None, attn_mask, b, s,
                                              cache.length(0))
            if attn_mask is not None:
                raise UnsupportedError("attn_mask: not with a cache (the cached calls take "
                                       "none)")
            if cu_seqlens is not None:
                raise UnsupportedError("cu_seqlens: not with a cache")
            if attention_mask is not None:
                raise UnsupportedError("attention_mask: not with a cache (the cache holds "
                                       "each sequence's own tokens: give it no padding)")
            self._check_length(lambda: [cache.length(i) for i in range(b)], start, ids, s, None)
            _ropeattn.layer_forward_cached(self._layer, context, cache._cache, y, x3, start,
                                           ids, whole)
        else:
            mask = None if attention_mask is None else padding_mask(attention_mask, b, s,
                                                                      "attention_mask")
            whole = token_type_ids is not None
            attn_mask = (self._token_type_mask(token_type_ids, mask, attn_mask, b, s) if whole
                         else attn_mask)
            if attn_mask is not None:
                attn_mask = _attn_mask(attn_mask, (b, self._config["n_heads"], s, s), None)
            self._check_length(lambda: [0] * b, start, ids, s, None, cached=False)
            if cu_seqlens is not None:
                cu_seqlens = as_array(cu_seqlens, "cu_seqlens")
                if cu_seqlens.dtype.kind not in "iu" or cu_seqlens.ndim != 1:
                    raise ArgumentError(f"cu_seqlens: expected integers [n + 1], got "
                                        f"{cu_seqlens.dtype} {cu_seqlens.shape}")
                cu_seqlens = index_copy(cu_seqlens, "cu_seqlens")
            _ropeattn.layer_forward(self._layer, context, y, x3, start, ids, mask, attn_mask,
                                    cu_seqlens, whole)
        return y if x.ndim == 3 else y[0]

    def _token_type_mask(self, token_type_ids, padding, attn_mask, b, s, past=0):
        """token_type_ids' whole mask (a token_types layer's:
        ra_hf_token_type_mask_cached, [B, 1, S, past + S] bool, for S
        queries after past cached tokens; token_type_ids [B, past + S])."""
        if not self._token_types:
            raise ArgumentError("token_type_ids: only a layer from from_pretrained(..., "
                                "token_types=True) takes them (model_type gemma3)")
        if attn_mask is not None:
            raise ArgumentError("token_type_ids: not with attn_mask (they make the whole mask)")
        tt = as_array(token_type_ids, "token_type_ids")
        n = past + s
        if tt.dtype.kind not in "iu" or tt.shape not in ((b, n), (n,) if b == 1 else (b, n)):
            what = " (every token so far: the cache's and this call's)" if past else ""
            raise ArgumentError(f"token_type_ids: expected integers [{b}, {n}]{what}, got "
                                f"{tt.dtype} {tt.shape}")
        tt = index_copy(tt.reshape(b, n), "token_type_ids")
        mask = np.empty((b, 1, s, n), dtype=np.bool_)
        self._layer.token_type_mask(tt, padding, mask, past)
        return mask

    def _check_length(self, lengths, start, ids, s, n_new, cached=True):
        """transformers forms a dynamic or longrope rope's frequencies from
        each forward's length, its tokens' largest position + 1
        (dynamic_rope_update): a call, or a step of cached generation,
        whose length gives other frequencies than the Layer's is refused
        (as the CLI's --prefill refuses such a step) unless
        from_pretrained's seq_len fixed the length for every call.  Lengths
        beyond the Layer's own are the library's to refuse (its positions).
          lengths: a function giving each row's cached tokens (0s without
          a cache), called only for such a rope; start,
          ids: the positions (start -1: continuing from lengths); n_new:
          each row's new tokens (None: s); cached: a step through a cache
          or pool (for the message)."""
        rope = self._config["rope"]
        kind = _ROPE_TYPE_NAMES.get(rope["type"])
        if kind not in ("dynamic", "longrope") or self._seq_len is not None or \
                self._config["no_rope"]:
            return
        try:
            lengths = lengths()
        except ArgumentError:  # a row the cache or pool has not: the library names it
            return
        news = [s] * len(lengths) if n_new is None else [int(n) for n in n_new]
        if start == -1:
            reach = max((length + n for length, n in zip(lengths, news) if n), default=0)
        elif ids is None:
            reach = start + max(news) if max(news) else 0
        else:
            reach = max((int(ids[..., i, :n].max()) + 1 for i, n in enumerate(news) if n),
                        default=0)
        key = "max_position_embeddings" if kind == "dynamic" else \
            "original_max_position_embeddings"
        original, length = rope[key], rope["seq_len"]
        if kind == "dynamic":
            same = max(reach, original) == max(length, original)
        else:
            same = (reach > original) == (length > original)
        if not reach or same or reach > max(length, original):
            return
        what = "this step's tokens reach" if cached else "the positions reach"
        fix = ("run the whole sequence without a cache on a Layer for its length" if cached
               else f"build a Layer for this call's length (max_position={reach - 1})")
        raise ArgumentError(
            f"rope type {kind}: {what} length {reach}, whose frequencies differ from those "
            f"of the Layer's length {length} ({key} {original}); transformers forms them "
            f"from each forward's length, so its y differs from the Layer's: {fix}, or fix "
            f"the length with Layer.from_pretrained(seq_len=...)")

    def __repr__(self):
        c = self._config
        return (f"ropeattn.Layer({self._layer.model_type or 'no model_type'}, "
                f"layer={self.layer_index}, dim={c['dim']}, n_heads={c['n_heads']}, "
                f"n_kv_heads={c['n_kv_heads']}, head_dim={c['head_dim']})")


class KVCache:
    """A layer's keys and values for generation: K and V, each
    [B, slots, Hkv, D] in float32, float16 or bfloat16 (keys stored
    rotated), and the tokens appended so far; for a latent-attention layer
    (config["kv_lora_rank"] r > 0) a latent cache instead, one row of
    Dr + r values a token (its rotated shared key and its latent, Dr =
    head_dim - qk_nope_head_dim), decoded with kv_b_proj absorbed into the
    query and the output.  Pass it to the layer:

        cache = ropeattn.KVCache(layer, batch=B, capacity=T)
        y = layer(x_prompt, cache=cache)         # prefill: [B, P, dim]
        y = layer(x_next, cache=cache)           # decode: [B, 1, dim], position P

    KVCache(layer, batch, capacity, dtype="float32", window=False, scale=None)
      layer: the Layer it serves (a cache serves that layer only).
      batch: B, the sequences; every call gives all B, S tokens each.
      capacity: the tokens each sequence can hold (a full cache: one more
        raises CacheFullError, changing nothing).  With window=True, the
        most tokens one call appends (the longest prefill).
      dtype: "float32", "float16" or "bfloat16": keys and values are
        rounded to it when cached (attention still in float32); "int8":
        each token's row of each kv head quantized with its own scale
        (max|x| / 127); "float8_e4m3fn": fp8 e4m3 codes of x / scale,
        saturating at +-448 scale.  A latent cache's int8 rows have one
        scale each (a token's rotated shared key and latent together).
      scale: with "float8_e4m3fn", the keys' and values' scale (default 1,
        as vLLM's without calibration): a normal float32 (subnormal ones
        refused, as the CLI's --cache-scale) at most FLT_MAX / 448.
      window=True: for a layer with a sliding window or chunk of W tokens
        (config["window"], config["chunk"]), a rolling cache of
        W - 1 + capacity slots: a conversation of any length in O(W) memory
        (positions and length keep counting every token).  A layer without
        either (a latent-attention layer among them) raises ArgumentError.

    len(cache): the tokens appended to each sequence (every sequence has the
    same: each call appends S to all).  cache.length(b): sequence b's.
    cache.reset(): back to empty.  Calls that write a cache take it to
    themselves: give each Python thread its own.
    """

    def __init__(self, layer, batch, capacity, dtype="float32", window=False, scale=None):
        if not isinstance(layer, Layer):
            raise TypeError(f"layer: expected a ropeattn.Layer, got {type(layer).__name__}")
        name = _cache_dtype(dtype, scale, "cache")
        c = layer._config
        w = 0
        if flag(window, "window"):
            w = max(c["window"], c["chunk"])
            if not w:
                raise ArgumentError("window=True: the layer has no sliding window or chunk "
                                    "(config window and chunk are 0): use a full cache")
        self._layer = layer
        self.batch = _count(batch, "batch", 1)
        self.capacity = _count(capacity, "capacity", 1)
        if self.batch is None or self.capacity is None:
            raise ArgumentError("batch and capacity: expected integers >= 1")
        self.dtype = name
        self.window = w or None
        if c["kv_lora_rank"]:  # one row a token: the rotated shared key, the latent
            self._cache = _ropeattn.KVCache(self.batch, self.capacity, 1,
                                            c["head_dim"] - c["qk_nope_head_dim"],
                                            _CACHE_DTYPES[name], latent=c["kv_lora_rank"],
                                            scale=float(scale or 0))
        else:
            self._cache = _ropeattn.KVCache(self.batch, self.capacity, c["n_kv_heads"],
                                            c["head_dim"], _CACHE_DTYPES[name], window=w,
                                            scale=float(scale or 0))

    @property
    def layer(self):
        """The Layer the cache serves (read-only: its keys and values are that
        layer's)."""
        return self._layer

    @property
    def slots(self):
        """Token slots per sequence: capacity, or W - 1 + capacity for a
        window cache."""
        return self._cache.slots

    def __len__(self):
        return self._cache.length(0)

    def length(self, b):
        """The tokens appended to sequence b (0 <= b < batch)."""
        if not isinstance(b, numbers.Integral) or isinstance(b, bool) or \
                not 0 <= b < self.batch:
            raise ArgumentError(f"b: expected a sequence in [0, {self.batch}), got {b!r}")
        return self._cache.length(int(b))

    def reset(self):
        """Every sequence back to 0 tokens (the storage is kept)."""
        self._cache.reset()

    def __repr__(self):
        kind = f", window={self.window}" if self.window else ""
        return (f"ropeattn.KVCache(batch={self.batch}, capacity={self.capacity}, "
                f"dtype={self.dtype!r}{kind}, length={len(self)})")


def _id_array(values, n, name):
    """values as C-contiguous int64 [n] (integers only)."""
    a = as_array(values, name)
    if a.shape != (n,) or (a.size and a.dtype.kind not in "iu"):
        raise ArgumentError(f"{name}: expected {n} integers (one per row of x), got "
                            f"{a.dtype} of shape {a.shape}")
    return index_copy(a, name)


class KVPool:
    """Keys and values of many sequences of one layer in pages of a shared
    pool, for serving (vLLM's PagedAttention): each sequence holds only the
    pages its tokens need, a forked one shares its parent's (copy on
    write), and a freed one gives them back.  Serve it through the layer:

        pool = ropeattn.KVPool(layer, n_pages=1024, page_size=16)
        a, b = pool.add(), pool.add()
        y = layer(x, pool=pool, ids=[a, b], n_new=[7, 3])   # prefills: x [2, 7, dim]
        y = layer(x1, pool=pool, ids=[a, b])                # a step each: x1 [2, 1, dim]

    KVPool(layer, n_pages, page_size=16, max_sequences=256, dtype="float32",
           scale=None)
      n_pages, page_size: the pool's pages and the tokens each holds.
      max_sequences: how many sequences may live at once (the first
        ids are 0 .. max_sequences - 1; a freed sequence's id is never
        given again, and any call given it raises ArgumentError).
      dtype, scale: as KVCache's ("float32", "float16", "bfloat16", "int8",
        "float8_e4m3fn"); every token attends over the stored rows.
    pool.add(window=False): a new empty sequence's id; window=True keeps
    only the layer's sliding window (config["window"] or ["chunk"]),
    releasing the pages it passes.  pool.fork(id): a new sequence holding
    id's tokens (pages shared).  pool.free(id).  pool.length(id): its
    tokens.  pool.free_pages: pages no sequence holds.  Calls that write a
    pool take it to themselves.  Not for latent attention.
    """

    def __init__(self, layer, n_pages, page_size=16, max_sequences=256, dtype="float32",
                 scale=None):
        if not isinstance(layer, Layer):
            raise TypeError(f"layer: expected a ropeattn.Layer, got {type(layer).__name__}")
        c = layer._config
        if c["kv_lora_rank"]:
            raise UnsupportedError("KVPool: latent attention caches latents: use KVCache")
        name = _cache_dtype(dtype, scale, "pool")
        sizes = [_count(v, n, 1) for v, n in ((n_pages, "n_pages"), (page_size, "page_size"),
                                              (max_sequences, "max_sequences"))]
        if None in sizes:
            raise ArgumentError("n_pages, page_size and max_sequences: expected integers >= 1")
        self._layer = layer
        self.n_pages, self.page_size, self.max_sequences = sizes
        self.dtype = name
        self._pool = _ropeattn.KVPool(*sizes, c["n_kv_heads"], c["head_dim"],
                                      _CACHE_DTYPES[name], scale=float(scale or 0))

    @property
    def layer(self):
        """The Layer the pool serves (read-only: its keys and values are that
        layer's)."""
        return self._layer

    def add(self, window=False):
        """A new empty sequence's id (window=True: the layer's window)."""
        w = 0
        if flag(window, "window"):
            w = max(self._layer._config["window"], self._layer._config["chunk"])
            if not w:
                raise ArgumentError("window=True: the layer has no sliding window or chunk")
        return self._pool.add(w)

    def fork(self, seq):
        """A new sequence holding seq's tokens, its pages shared."""
        return self._pool.fork(self._id(seq))

    def free(self, seq):
        """Sequence seq's pages back to the pool (those no fork holds)."""
        self._pool.free(self._id(seq))

    def length(self, seq):
        """The tokens appended to sequence seq."""
        return self._pool.length(self._id(seq))

    @property
    def free_pages(self):
        """Pages no sequence holds."""
        return self._pool.free_pages

    @staticmethod
    def _id(seq):
        if not isinstance(seq, numbers.Integral) or isinstance(seq, bool) or \
                not -2 ** 63 <= seq < 2 ** 63:
            raise ArgumentError(f"expected a sequence id (an int64), got {seq!r}")
        return int(seq)

    def __repr__(self):
        return (f"ropeattn.KVPool(n_pages={self.n_pages}, page_size={self.page_size}, "
                f"dtype={self.dtype!r}, free_pages={self.free_pages})")


__all__ = ["KVCache", "KVPool", "Layer"]
