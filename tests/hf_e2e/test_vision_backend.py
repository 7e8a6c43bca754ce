"""attn_implementation="ropeattn" on vision attention (issue 43): tiny
random models built by transformers, float32, against its own "sdpa" and
"eager":
  - Pixtral's vision encoder (2-D RoPE): the patches of two images of
    different sizes in one sequence, a block-diagonal additive mask
    (generate_block_attention_mask), given to the library whole;
  - Qwen2-VL's vision encoder: each image's patches attend among
    themselves (cu_seqlens; outside flash attention transformers splits
    the sequence per image and calls the backend once per image,
    attention_mask None, is_causal False);
  - Qwen2.5-VL's vision encoder: its window-attention blocks (0 and 2; 1
    and 3 full) attend inside each window of the patches in window order
    (cu_window_seqlens, one backend call per window), three images whose
    windows the frames' edges cut, one of two frames with empty padded
    windows; and ropeattn.vision_windows equal to transformers'
    get_vision_window_index and the tower's rotary positions on many grids
    and configs;
  - Gemma 3 (Gemma3Model: SigLIP vision tower and the text model):
    token_type_ids mark the image tokens, which attend to each other
    bidirectionally on top of the causal and sliding-window masks
    (create_masks_for_vision_model), with left padding;
  - Llama 4's vision model (Llama4VisionModel): 2-D RoPE applied by
    transformers (complex freqs_ci), every patch and the CLS token
    attending to all (attention_mask None, is_causal=False).
Outputs for all five, the parameters' gradients for Pixtral, Qwen2.5-VL,
Gemma 3 and Llama 4; Gemma 3's generate() with images (the prefill's image
blocks, then text steps through the cache; whole and in chunks that cut a
block) against sdpa's and eager's tokens and logits.

    PYTHONPATH=build/hf-e2e-python .venv-hf/bin/python -m pytest -q \
        tests/hf_e2e/test_vision_backend.py
"""
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
import ropeattn.transformers  # noqa: E402,F401  (registers "ropeattn")
import check  # noqa: E402
import models  # noqa: E402
from transformers.models.llama4.modeling_llama4 import Llama4VisionAttention  # noqa: E402
from transformers.models.qwen2_5_vl.modeling_qwen2_5_vl import (  # noqa: E402
    Qwen2_5_VisionTransformerPretrainedModel)
from transformers.models.qwen2_vl.modeling_qwen2_vl import (  # noqa: E402
    Qwen2VisionTransformerPretrainedModel)
from transformers.vision_utils import (  # noqa: E402
    get_vision_position_ids, get_vision_window_index)

# float32, the same weights, a few layers: 1e-4 of the largest value (issue
# 43's bar), room for float32 sums in another order, far below a wrong mask
REL = 1e-4
IMAGE_TOKEN = 5


def rel_error(got, want):
    got, want = got.detach().double(), want.detach().double()
    scale = float(want.abs().max())
    return float((got - want).abs().max()) / (scale if scale > 0 else 1.0)


def randomized(model):
    """model in eval mode, its parameters moved off their initial values
    (norms at 1, biases at 0 would hide a wrong sum)."""
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.1 * torch.randn(p.shape))
    return model.eval()


def pixtral():
    """(model, inputs): two images of 24x16 and 8x32 pixels, patches of 8
    (3x2 and 1x4 patches), padded into one [2, 3, 24, 32] tensor."""
    torch.manual_seed(43)
    config = transformers.PixtralVisionConfig(
        hidden_size=64, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
        head_dim=16, num_channels=3, image_size=32, patch_size=8)
    model = randomized(transformers.PixtralVisionModel(config))
    pixels = torch.randn(2, 3, 24, 32, generator=torch.Generator().manual_seed(7))
    return model, dict(pixel_values=pixels, image_sizes=torch.tensor([[24, 16], [8, 32]]))


def qwen2_vl():
    """(model, inputs): two images of 4x4 and 2x6 patches (grid_thw), the
    flattened patches as Qwen2-VL's processor gives them."""
    torch.manual_seed(43)
    config = transformers.Qwen2VLVisionConfig(
        depth=2, embed_dim=64, hidden_size=64, num_heads=4, mlp_ratio=2, in_channels=3,
        patch_size=4, spatial_merge_size=2, temporal_patch_size=2)
    model = randomized(Qwen2VisionTransformerPretrainedModel(config))
    grid = torch.tensor([[1, 4, 4], [1, 2, 6]])
    n = int(grid.prod(-1).sum())
    pixels = torch.randn(n, 3 * 2 * 4 * 4, generator=torch.Generator().manual_seed(7))
    return model, dict(hidden_states=pixels, grid_thw=grid)


def qwen2_5_vl():
    """(model, inputs): Qwen2.5-VL's vision tower of 4 blocks (1 and 3 full,
    0 and 2 windows of 2 x 2 merged units: window_size 16, patch_size 4,
    spatial_merge_size 2), three images of 6 x 10, 2 x (4 x 4) and 2 x 2
    patches (grid_thw), the flattened patches as the processor gives them."""
    torch.manual_seed(43)
    config = transformers.Qwen2_5_VLVisionConfig(
        depth=4, hidden_size=64, intermediate_size=96, num_heads=4, out_hidden_size=32,
        in_channels=3, patch_size=4, spatial_merge_size=2, temporal_patch_size=2,
        window_size=16, fullatt_block_indexes=[1, 3])
    model = randomized(Qwen2_5_VisionTransformerPretrainedModel(config))
    grid = torch.tensor([[1, 6, 10], [2, 4, 4], [1, 2, 2]])
    n = int(grid.prod(-1).sum())
    pixels = torch.randn(n, 3 * 2 * 4 * 4, generator=torch.Generator().manual_seed(7))
    return model, dict(hidden_states=pixels, grid_thw=grid)


def gemma3():
    """(model, inputs): two sequences of 14 tokens, one left-padded by 3,
    each with one image of 4 tokens (token_type_ids 1) among text; sliding
    window 4 in layers 0 and 1, global layer 2."""
    torch.manual_seed(43)
    text = transformers.Gemma3TextConfig(
        vocab_size=37, hidden_size=64, intermediate_size=96, num_hidden_layers=3,
        num_attention_heads=4, num_key_value_heads=2, head_dim=16, sliding_window=4,
        layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        max_position_embeddings=64, pad_token_id=0)
    vision = transformers.SiglipVisionConfig(
        hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
        image_size=16, patch_size=4)
    config = transformers.Gemma3Config(
        text_config=text.to_dict(), vision_config=vision.to_dict(), mm_tokens_per_image=4,
        image_token_index=IMAGE_TOKEN, boi_token_index=3, eoi_token_index=4)
    model = randomized(transformers.Gemma3Model(config))
    gen = torch.Generator().manual_seed(7)
    ids = torch.randint(6, 37, (2, 14), generator=gen)
    ids[0, 4:10] = torch.tensor([3, 5, 5, 5, 5, 4])
    ids[1, 6:12] = torch.tensor([3, 5, 5, 5, 5, 4])
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    ids[mask == 0] = 0
    return model, dict(input_ids=ids, attention_mask=mask,
                       token_type_ids=(ids == IMAGE_TOKEN).long(),
                       pixel_values=torch.randn(2, 3, 16, 16, generator=gen))


def llama4():
    """(model, inputs): Llama4VisionModel, two images of 4x4 patches of 8
    pixels and the CLS token: its attention (Llama4VisionAttention, 2-D
    rope by complex freqs_ci in transformers' code) is bidirectional, mask
    None, is_causal=False passed."""
    torch.manual_seed(43)
    config = transformers.Llama4VisionConfig(
        hidden_size=64, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4,
        image_size=32, patch_size=8, vision_output_dim=64, projector_input_dim=64,
        projector_output_dim=64, rope_parameters={"rope_type": "default", "rope_theta": 10000.0})
    model = randomized(transformers.Llama4VisionModel(config))
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(7))
    return model, dict(pixel_values=pixels)


MODELS = {"pixtral": pixtral, "qwen2_vl": qwen2_vl, "qwen2_5_vl": qwen2_5_vl, "gemma3": gemma3,
          "llama4": llama4}


@pytest.fixture(scope="module", params=sorted(MODELS))
def built(request):
    return (request.param, *MODELS[request.param]())


def real_rows(name, inputs):
    """The rows compared: Gemma 3's real tokens (padding rows differ by
    backend), every row otherwise."""
    if name == "gemma3":
        return inputs["attention_mask"].bool()
    return Ellipsis


def forward(model, impl, inputs):
    model.set_attn_implementation(impl)
    return model(**inputs).last_hidden_state


def test_outputs_match_transformers(built):
    name, model, inputs = built
    rows = real_rows(name, inputs)
    with torch.no_grad(), check.counting_calls() as calls:
        got = forward(model, "ropeattn", inputs)[rows]
    # Llama4VisionAttention has no is_causal: it passes is_causal=False
    attention = [m for m in model.modules()
                 if hasattr(m, "is_causal") or isinstance(m, Llama4VisionAttention)]
    assert attention and set(calls) == set(attention), name  # every layer ran here
    if name == "gemma3":  # the image tokens' bidirectional mask changes the result
        with torch.no_grad():
            plain = forward(model, "ropeattn", dict(inputs, token_type_ids=None))[rows]
        assert rel_error(plain, got) > 1e-3
    for impl in ("sdpa", "eager"):
        with torch.no_grad():
            err = rel_error(got, forward(model, impl, inputs)[rows])
        print(f"{name} output vs {impl}: {err:.3g}")
        assert err <= REL, (name, impl, err)


@pytest.mark.parametrize("name", ["pixtral", "qwen2_5_vl", "gemma3", "llama4"])
def test_gradients_match_transformers(name):
    model, inputs = MODELS[name]()
    rows = real_rows(name, inputs)

    def run(impl):
        model.zero_grad()
        out = forward(model, impl, inputs)
        dy = torch.randn(out.shape, generator=torch.Generator().manual_seed(11))
        if name == "gemma3":
            dy = dy * inputs["attention_mask"][..., None]  # no loss on padding rows
        (out * dy).sum().backward()
        return out.detach()[rows], {n: p.grad.clone() for n, p in model.named_parameters()
                                    if p.grad is not None}

    got, grads = run("ropeattn")
    assert grads
    for impl in ("sdpa", "eager"):
        want, want_grads = run(impl)
        assert rel_error(got, want) <= REL, (name, impl)
        assert grads.keys() == want_grads.keys()
        # k_proj.bias's gradient is 0 in exact arithmetic (it adds the same
        # q.b to every score of a row): only rounding, measured against the
        # largest gradient of all instead of its own
        top = max(float(g.abs().max()) for g in want_grads.values())
        worst = max((rel_error(g, want_grads[k]) if not k.endswith("k_proj.bias") else
                     float((g - want_grads[k]).abs().max()) / top, k)
                    for k, g in grads.items())
        print(f"{name} gradients vs {impl}: worst {worst[0]:.3g} ({worst[1]})")
        assert worst[0] <= REL, (name, impl, worst)


@pytest.mark.parametrize("window, patch, merge, grids", [
    (16, 4, 2, [[1, 6, 10], [2, 4, 4], [1, 2, 2]]),   # the model's: edge-cut and empty windows
    (112, 14, 2, [[1, 16, 16], [1, 34, 22], [3, 8, 12]]),  # Qwen2.5-VL's own sizes
    (8, 1, 1, [[2, 3, 17], [1, 8, 8], [1, 1, 1]]),    # no merging
    (30, 2, 3, [[1, 9, 21], [1, 3, 3]]),              # vws 5, 3 x 3 units
    (64, 4, 2, [[1, 2, 2], [1, 4, 30]]),              # windows larger than an image
])
def test_vision_windows_match_transformers(tmp_path, window, patch, merge, grids):
    """ropeattn.vision_windows against get_vision_window_index, and its
    positions against the tower's: get_vision_position_ids permuted by
    window_index in groups of merge^2 (permute_input_for_window_attn)."""
    config = transformers.Qwen2_5_VLVisionConfig(
        window_size=window, patch_size=patch, spatial_merge_size=merge)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "config.json").write_text(
        '{"model_type": "qwen2_5_vl", "vision_config": %s}' % config.to_json_string())
    grid = torch.tensor(grids)
    index, cu = get_vision_window_index(grid, merge, window, patch)
    got = ropeattn.vision_windows(folder, grids)
    assert got.window_index.tolist() == index.tolist()
    assert got.cu_window_seqlens.tolist() == cu.tolist()
    n, unit = int(grid.prod(-1).sum()), merge * merge
    pos = get_vision_position_ids(grid, merge).reshape(n // unit, unit, 2)[index].reshape(n, 2)
    assert got.positions.tolist() == pos.tolist()
    assert got.patch_index.tolist() == torch.arange(n).reshape(n // unit, unit)[index].reshape(
        -1).tolist()


def gemma3_generator():
    """Gemma3ForConditionalGeneration on gemma3()'s config and inputs, with
    sliding_window 3 (each image's 4 tokens a block longer than the window)
    and untied embeddings, weights as the family checkpoints' (models.randomize:
    greedy tokens that vary)."""
    base, inputs = gemma3()
    config = base.config
    config.text_config.sliding_window = 3
    config.tie_word_embeddings = config.text_config.tie_word_embeddings = False
    model = transformers.Gemma3ForConditionalGeneration(config)
    models.randomize(model, torch.Generator().manual_seed(models.SEED))
    model.generation_config.pad_token_id = 0
    return model.eval(), inputs


@pytest.mark.parametrize("chunk", [None, 5])
def test_generate_with_images(chunk):
    """generate() with pixel_values and token_type_ids, greedy, 10 tokens:
    the same tokens as sdpa's and eager's, every step's logits within REL
    of theirs.  The prefill's mask is the image blocks' (row 1's block
    longer than the window; a block changes the last logits by about 5%:
    checked against a run without token_type_ids); the steps are text.
    chunk 5: transformers' prefill_chunk_size, row 1's block (tokens 7..10)
    cut by the chunks' edge at 10."""
    model, inputs = gemma3_generator()

    def run(impl, **change):
        model.set_attn_implementation(impl)
        with torch.no_grad():
            out = model.generate(**dict(inputs, **change), do_sample=False, max_new_tokens=10,
                                 min_new_tokens=10, output_logits=True,
                                 return_dict_in_generate=True, prefill_chunk_size=chunk)
        return out.sequences[:, inputs["input_ids"].shape[1]:], torch.stack(out.logits)

    with check.counting_calls() as calls:
        tokens, logits = run("ropeattn")
    assert calls  # the backend ran
    assert rel_error(run("ropeattn", token_type_ids=None)[1][0], logits[0]) > 1e-3
    for impl in ("sdpa", "eager"):
        want_tokens, want = run(impl)
        err = rel_error(logits, want)
        print(f"gemma3 generate (chunk {chunk}) vs {impl}: tokens {tokens.tolist()}, "
              f"logits {err:.3g}")
        assert torch.equal(tokens, want_tokens), impl
        assert err <= REL, (impl, err)
