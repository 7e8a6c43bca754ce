"""Tiny random checkpoints of the family table, saved by transformers'
save_pretrained and loaded back by from_pretrained, and the inputs the tests
give them."""
import torch
from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

SEED = 40
WEIGHT_STD = 0.3  # wider than the classes' init: a softmax far from uniform


def auto_class(config):
    """The Auto class that builds config's model: ...ForConditionalGeneration
    for a multimodal one (a vision_config), else ...ForCausalLM."""
    return AutoModelForImageTextToText if hasattr(config, "vision_config") else AutoModelForCausalLM


def make_config(family):
    """The family's config (a multimodal one's: config_kwargs as its
    text_config); every dropout 0, its sub-configs' too, so that a
    training step is deterministic."""
    if family.vision:
        config = AutoConfig.for_model(family.model_type, text_config=family.config_kwargs(),
                                      vision_config=family.vision, tie_word_embeddings=False)
    else:
        config = AutoConfig.for_model(family.model_type, **family.config_kwargs())
    for part in [config] + [getattr(config, key) for key in config.sub_configs]:
        for key in list(part.to_dict()):
            if "dropout" in key or key.endswith("pdrop") or key == "router_jitter_noise":
                setattr(part, key, 0.0)
    return config


def randomize(model, gen):
    """Every weight of two or more dims (projections, embeddings, experts,
    routers) normal with WEIGHT_STD; every vector (biases, norms' weights,
    gpt-oss's sinks) moved off its init by a normal of 0.1, so that a norm or
    bias the backend dropped shows."""
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2:
                p.copy_(torch.randn(p.shape, generator=gen) * WEIGHT_STD)
            else:
                p.add_(torch.randn(p.shape, generator=gen) * 0.1)


def save_checkpoint(family, path):
    """Builds the family's model, randomizes it and saves it (float32)."""
    gen = torch.Generator().manual_seed(SEED)
    config = make_config(family)
    model = auto_class(config).from_config(config, attn_implementation="eager")
    randomize(model, gen)
    model.save_pretrained(path)
    return path


def load(path, attn_implementation, dtype=torch.float32):
    model = auto_class(AutoConfig.from_pretrained(path)).from_pretrained(
        path, attn_implementation=attn_implementation, dtype=dtype)
    return model.eval()


def prompt_ids(batch, length, seed=SEED + 1, vocab=128):
    """[batch, length] int64 token ids, none of them bos, eos or pad."""
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (batch, length), generator=gen)


def left_padded(lengths, seed=SEED + 2, vocab=128, pad=0):
    """Prompts of the given lengths, left-padded to the longest with pad:
    (input_ids [B, S], attention_mask [B, S])."""
    longest = max(lengths)
    ids = prompt_ids(len(lengths), longest, seed, vocab)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, longest - n:] = 1
    return ids.masked_fill(mask == 0, pad), mask


def padded_positions(mask):
    """position_ids of a left-padded batch as generate() makes them: each
    row counts from 0 at its first token."""
    return (mask.cumsum(-1) - 1).clamp(min=0)
