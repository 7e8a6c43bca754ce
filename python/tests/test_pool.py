"""KVPool: the layer serving ragged sequences from a paged pool, on the
checkpoints transformers itself saved (tests/hf, as test_layer.py): each
sequence's tokens, given in rounds of different sizes beside the others',
must give transformers' y to the tolerances of the caches (test_layer.py's
TOL: float32 1e-5 of max|y|, the 16-bit and 8-bit rows their rounding).
Also forks (a shared prompt), freeing, refusals that change nothing."""
import json

import numpy as np
import pytest

import ropeattn
from test_layer import CASES, HF, TOL, build, fixed_length, rel


def serve(layer, pool, x, pos, firsts):
    """Every row of x [B, S, dim] through the pool: sequence i first takes
    firsts[i] tokens, then one a call; rows are given in reverse order and
    drop out when done (n_new 0).  Returns y [B, S, dim]."""
    b, s, dim = x.shape
    ids = [pool.add() for _ in range(b)]
    done, y = [0] * b, np.zeros_like(x)
    while min(done) < s:
        n_new = [min(firsts[i] if done[i] == 0 else 1, s - done[i]) for i in range(b)][::-1]
        width = max(n_new)
        xs = np.zeros((b, width, dim), np.float32)
        ps = np.zeros(pos.shape[:-2] + (b, width), np.int64)  # M-RoPE's: [3, B, width]
        for r, i in enumerate(reversed(range(b))):
            xs[r, :n_new[r]] = x[i, done[i]:done[i] + n_new[r]]
            ps[..., r, :n_new[r]] = pos[..., i, done[i]:done[i] + n_new[r]]
        ys = layer(xs, positions=ps, pool=pool, ids=ids[::-1], n_new=n_new)
        for r, i in enumerate(reversed(range(b))):
            assert not ys[r, n_new[r]:].any()
            y[i, done[i]:done[i] + n_new[r]] = ys[r, :n_new[r]]
            done[i] += n_new[r]
    assert [pool.length(i) for i in ids] == [s] * b
    return y


@pytest.mark.parametrize("name", CASES)
def test_serving_matches_transformers(name):
    layer, x, pos, y = build(name, **fixed_length(name))
    s = x.shape[1]
    if layer.config.get("kv_lora_rank"):  # latent attention: no paged pool
        with pytest.raises(ropeattn.UnsupportedError, match="latent"):
            ropeattn.KVPool(layer, n_pages=64, page_size=3)
        return
    pool = ropeattn.KVPool(layer, n_pages=64, page_size=3)
    firsts = [max(1, s // 2 - i) for i in range(x.shape[0])]
    if layer.config["non_causal"]:  # an encoder's layer: no cache, paged or not
        with pytest.raises(ropeattn.UnsupportedError, match="non_causal"):
            serve(layer, pool, x, pos, firsts)
        return
    assert rel(serve(layer, pool, x, pos, firsts), y) < TOL["float32"]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int8", "float8_e4m3fn"])
def test_pool_dtypes(dtype):
    layer, x, pos, y = build("llama_default")
    pool = ropeattn.KVPool(layer, n_pages=32, page_size=4, dtype=dtype)
    assert rel(serve(layer, pool, x, pos, [3, 5]), y) < TOL[dtype]


def test_fork_and_free():
    layer, x, pos, y = build("llama_default")
    s, p = x.shape[1], 4
    pool = ropeattn.KVPool(layer, n_pages=16, page_size=2)
    a = pool.add()
    layer(x[:1, :p], positions=pos[:1, :p], pool=pool, ids=[a])
    b = pool.fork(a)  # the prompt's pages shared
    assert pool.length(b) == p and pool.free_pages == 16 - p // 2
    rest = x[:1, p:], pos[:1, p:]
    ya = layer(rest[0], positions=rest[1], pool=pool, ids=[a])
    yb = layer(rest[0], positions=rest[1], pool=pool, ids=[b])
    np.testing.assert_array_equal(ya, yb)
    assert rel(ya, y[:1, p:]) < 1e-5
    pool.free(a)
    pool.free(b)
    assert pool.free_pages == 16


def test_refusals_change_nothing():
    layer, x, pos, _ = build("llama_default")
    pool = ropeattn.KVPool(layer, n_pages=2, page_size=2)
    a = pool.add()
    with pytest.raises(ropeattn.CacheFullError, match="ra_layer_forward_paged"):
        layer(x[:1, :5], pool=pool, ids=[a])  # 5 tokens, 4 slots
    assert pool.length(a) == 0 and pool.free_pages == 2
    with pytest.raises(ropeattn.ArgumentError):
        layer(x[:1, :2], pool=pool, ids=[a, a])  # one id for 1 row
    with pytest.raises(ropeattn.ArgumentError):
        layer(x[:1, :2], pool=pool)  # no ids
    with pytest.raises(ropeattn.ArgumentError):
        layer(x[:1, :2], pool=pool, ids=[a], n_new=[3])  # more than S
    with pytest.raises(ropeattn.ArgumentError):
        layer(x[:1, :2], pool=pool, ids=[a + 1])  # not a sequence
    with pytest.raises(ropeattn.ArgumentError):
        pool.add(window=True)  # the layer has no window
    with pytest.raises(ropeattn.ArgumentError, match="n_new"):
        layer(x[:1, :2], cache=ropeattn.KVCache(layer, 1, 4), n_new=[1])  # not without a pool
    with pytest.raises(ropeattn.DtypeError):
        ropeattn.KVPool(layer, 4, dtype="float64")
    other, _, _, _ = build("llama_default")
    with pytest.raises(ropeattn.ArgumentError, match="another Layer"):
        other(x[:1, :2], pool=pool, ids=[a])
    with pytest.raises(AttributeError):  # read-only: reassigned, it took another's keys
        pool.layer = other
    with pytest.raises(ropeattn.ArgumentError, match="sequence id"):
        pool.length(True)
    assert pool.length(a) == 0 and pool.free_pages == 2


def test_bad_ids_are_named():
    """A freed or unknown sequence id is refused naming ids[i], on every
    rope type (a Python check of each sequence's length said "length: 0 is
    not a sequence of the pool")."""
    for name in ("llama_default", "llama_dynamic_long"):
        d = HF / name
        layer = ropeattn.Layer.from_pretrained(d, layer=json.loads(
            (d / "case.json").read_text())["layer"], max_position=15)
        x = np.load(d / "x.npy")[:1, :2]
        pool = ropeattn.KVPool(layer, n_pages=8, page_size=4)
        freed = pool.add()
        pool.free(freed)
        for bad, named in ((freed, "was freed"), (99, "not a sequence"), (-1, "not a sequence")):
            with pytest.raises(ropeattn.ArgumentError, match=rf"ids\[0\] {bad}: .*{named}"):
                layer(x, pool=pool, ids=[bad])
        cache = ropeattn.KVCache(layer, batch=1, capacity=4)
        with pytest.raises(ropeattn.ArgumentError, match="batch"):
            layer(np.concatenate([x, x]), cache=cache)
    # past int64, by their own value: as int64 they read negative (ids[0] -1,
    # n_new[0] -1), or an OverflowError named no argument
    for ids, n_new, named in (([2 ** 63], None, "ids: 9223372036854775808"),
                              (np.array([2 ** 64 - 1], np.uint64), None,
                               "ids: 18446744073709551615"),
                              ([0], np.array([2 ** 63], np.uint64), "n_new: 9223372036854775808")):
        with pytest.raises(ropeattn.ArgumentError, match=named):
            layer(x, pool=pool, ids=ids, n_new=n_new)
    for call in (pool.length, pool.fork, pool.free):
        with pytest.raises(ropeattn.ArgumentError, match="sequence id"):
            call(2 ** 70)
    for size, named in ((dict(capacity=2 ** 70), "capacity"), (dict(batch=2 ** 63), "batch")):
        with pytest.raises(ropeattn.ArgumentError, match=named):
            ropeattn.KVCache(layer, **dict(dict(batch=1, capacity=4), **size))
    with pytest.raises(ropeattn.ArgumentError, match="n_pages"):
        ropeattn.KVPool(layer, n_pages=2 ** 64)
    for option in ("layer", "n_tokens", "max_position", "seq_len", "n_heads"):
        with pytest.raises(ropeattn.ArgumentError, match=option):
            ropeattn.Layer.from_pretrained(HF / "llama_default", **{option: 2 ** 70})


def test_freed_id_never_names_a_later_sequence():
    """A freed sequence's id, used again after its slot went to a new
    sequence, is refused by every call (it appended to, decoded and freed
    the new sequence, silently)."""
    layer, x, pos, _ = build("llama_default")
    pool = ropeattn.KVPool(layer, n_pages=8, page_size=2, max_sequences=1)
    a = pool.add()
    layer(x[:1, :2], pool=pool, ids=[a])
    pool.free(a)
    b = pool.add()
    assert b != a and pool.length(b) == 0
    for call in (pool.length, pool.fork, pool.free):
        with pytest.raises(ropeattn.ArgumentError, match="freed"):
            call(a)
    with pytest.raises(ropeattn.ArgumentError, match="freed"):
        layer(x[:1, :2], pool=pool, ids=[a])
    assert pool.length(b) == 0 and pool.free_pages == 8
    layer(x[:1, :2], pool=pool, ids=[b])
    assert pool.length(b) == 2
