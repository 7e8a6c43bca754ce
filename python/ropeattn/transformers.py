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
  - AttentionMaskInterface: mask(), which hands every layer transformers'
    own boolean mask for the call (sdpa_mask's, [B, 1, Sq, Sk]) carrying a
    Mask (.ropeattn_mask): where the call's queries and keys sit in the
    sequence (the cache's offsets: a sliding-window layer's cache holds
    only its last tokens) and the 2-D padding mask.  Each layer call finds the library's masks
    (causal, window, chunk, padding, documents from position_ids'
    restarts) that equal transformers' mask on every real query row, and
    hands the library transformers' mask whole (attn_mask) when none
    does (bidirectional image tokens).  Rows of padding queries are 0, as
    transformers' flash paths give them (its sdpa path gives 0 to left
    padding; its eager path a mean of v).
Encoders (a module whose is_causal is False: ModernBERT, ESM-2, Llama 4's
vision model) and cross attention (encoder-decoder models: T5Gemma,
T5Gemma 2's merged attention, Moonshine; queries and keys of different
lengths) run without the causal mask, transformers' bidirectional mask
(padding, ModernBERT's local window, the encoder's padding) as attn_mask.
A model whose config asks for what the library lacks (ALiBi,
output_attentions, a sparse-attention indexer) is refused when the
model is built with attn_implementation="ropeattn" (or set to it:
set_attn_implementation), naming the feature; what only a call shows (an
integer mask, position_bias, a keyword argument the function does not
know) is refused at the first forward.
"""
import functools
import importlib

from transformers import AttentionInterface, PreTrainedModel
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

from ._ropeattn import Context, UnsupportedError
from .torch import Mask, eager_attention_forward

NAME = "ropeattn"

# config attributes whose value the library cannot honour: (attribute, the
# value that is refused, the feature's name)
_REFUSED_CONFIG = (
    ("alibi", True, "alibi (ALiBi position biases)"),
    ("output_attentions", True, "output_attentions (the library returns no attention "
                                "weights)"),
)

# config attributes refused whatever their value: (attribute, the feature's name)
_REFUSED_FIELDS = (
    ("index_n_heads", "index_n_heads (a sparse-attention indexer selecting each query's keys: "
                      "DeepSeek V3.2, MiniMax M3)"),
)


def check_config(config):
    """Raises UnsupportedError naming the first feature of config (a
    transformers PretrainedConfig, its sub-configs included) that the
    backend cannot run as transformers does."""
    refused = [feature for attribute, value, feature in _REFUSED_CONFIG
               if getattr(config, attribute, None) is value]
    refused += [feature for attribute, feature in _REFUSED_FIELDS
                if getattr(config, attribute, None) is not None]
    if refused:
        raise UnsupportedError(f'attn_implementation="{NAME}": {refused[0]} is not supported '
                               f"({type(config).__name__})")
    for key in getattr(config, "sub_configs", {}):
        sub = getattr(config, key, None)
        if sub is not None:
            check_config(sub)


def _modeling_modules(model):
    """The modeling modules of model's class and of its config's sub-configs
    (a multimodal model's text model is another family's code)."""
    names = [type(model).__module__]
    for key in getattr(model.config, "sub_configs", {}):
        sub = getattr(model.config, key, None)
        if sub is not None and ".configuration_" in type(sub).__module__:
            names.append(type(sub).__module__.replace(".configuration_", ".modeling_"))
    modules = []
    for name in dict.fromkeys(names):
        try:
            modules.append(importlib.import_module(name))
        except ImportError:
            pass
    return modules


def check_model(model):
    """check_config(model.config), and UnsupportedError when model's
    modeling code picks its attention classes by name (Falcon, GPT-J: a
    *_ATTENTION_CLASSES table, which raises KeyError: 'ropeattn') or none
    of its modules (its own and its sub-configs') calls transformers'
    AttentionInterface: such code would never reach the backend."""
    modules = _modeling_modules(model)
    by_name = [m.__name__ for m in modules
               if any(k.endswith("_ATTENTION_CLASSES") for k in vars(m))]
    if by_name or not any(hasattr(m, "ALL_ATTENTION_FUNCTIONS") for m in modules):
        how = (f"{by_name[0]} picks an attention class by name" if by_name else
               "none of its modeling code calls it")
        raise UnsupportedError(f'attn_implementation="{NAME}": {type(model).__name__}\'s '
                               f"attention does not go through transformers' "
                               f"AttentionInterface ({how})")
    check_config(model.config)


def _checked(check):
    """PreTrainedModel._check_and_adjust_attn_implementation, which
    transformers calls when a model is built and when its implementation
    is set, or get_correct_attn_implementation, which set_attn_implementation
    calls for each sub-model a dict names ({"text_config": "ropeattn"}),
    followed by check_model when the result is "ropeattn"."""
    @functools.wraps(check)
    def wrapper(self, *args, **kwargs):
        implementation = check(self, *args, **kwargs)
        if implementation == NAME:
            check_model(self)
        return implementation
    wrapper.ropeattn_checks = True
    return wrapper


def mask(batch_size, q_length, kv_length, q_offset=0, kv_offset=0, mask_function=None,
         attention_mask=None, local_size=None, use_vmap=False, device="cpu", **kwargs):
    """The AttentionMaskInterface function of "ropeattn": transformers'
    boolean mask for the call (sdpa_mask's, never skipped; contiguous
    [B, 1, Sq, Sk]) carrying, as .ropeattn_mask, a Mask of the call's
    geometry.  A tensor, as transformers expects: generate() makes the
    mask of a static cache before the forward, which passes a 4-D tensor
    on as it is (a Mask alone raised AttributeError there)."""
    allowed = sdpa_mask(batch_size=batch_size, q_length=q_length, kv_length=kv_length,
                        q_offset=q_offset, kv_offset=kv_offset, mask_function=mask_function,
                        attention_mask=attention_mask, local_size=local_size,
                        allow_is_causal_skip=False, use_vmap=use_vmap, device=device)
    allowed = allowed.expand(batch_size, 1, q_length, kv_length).cpu().contiguous()
    # a copy: the 2-D mask as allowed was made from, whatever the caller does to it
    padding = None if attention_mask is None else attention_mask.cpu().clone()
    shown = allowed.view(allowed.shape)  # another object: the Mask holds allowed, no cycle
    shown.ropeattn_mask = Mask(int(q_offset), int(kv_offset), int(kv_length), padding,
                               local_size, allowed)
    return shown


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
    for name in ("_check_and_adjust_attn_implementation", "get_correct_attn_implementation"):
        check = getattr(PreTrainedModel, name)
        if not getattr(check, "ropeattn_checks", False):
            setattr(PreTrainedModel, name, _checked(check))


register()

__all__ = ["Mask", "check_config", "check_model", "mask", "register"]
