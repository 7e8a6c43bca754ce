"""The package: version, SIMD name, exceptions, several Python threads at
once, and no reference or memory growth over many calls."""
import multiprocessing
import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

import ropeattn
from threads import run_in_threads, wakeups_during


def test_version_and_simd():
    assert ropeattn.__version__ == ropeattn._ropeattn.HEADER_VERSION
    assert ropeattn.__version__.count(".") == 2
    assert ropeattn.simd() in ("amx", "avx512bf16", "avx512", "avx2", "sse2", "neon")


def test_exception_classes():
    for cls, builtin in [(ropeattn.ArgumentError, ValueError), (ropeattn.DtypeError, TypeError),
                         (ropeattn.UnsupportedError, NotImplementedError),
                         (ropeattn.OutOfMemoryError, MemoryError)]:
        assert issubclass(cls, ropeattn.Error) and issubclass(cls, builtin)
    assert ropeattn.Error.status is None
    with pytest.raises(ValueError, match="negative"):
        ropeattn.Context(threads=-1)
    for threads in (True, False, 1.0):  # a bool ran as a count (True: 1 thread)
        with pytest.raises(TypeError):
            ropeattn.Context(threads=threads)
    for threads in (4097, 2 ** 31, 2 ** 64):  # 2^31 raised OverflowError naming nothing
        with pytest.raises(ropeattn.ArgumentError, match=f"threads {threads} is past the "
                           "limit of 4096"):
            ropeattn.Context(threads)
    with pytest.raises(ropeattn.ArgumentError, match="negative"):
        ropeattn.Context(-2 ** 70)
    with pytest.raises(TypeError, match="float"):
        ropeattn.Context(threads=2.0)


def sample_inputs(seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 64, 4, 32)).astype(np.float32)
    k = rng.standard_normal((2, 64, 2, 32)).astype(np.float32)
    return x, k


def test_threads():
    """Eight Python threads, each with a shared rope, half with their own
    Context: every result the same bits as computed alone."""
    rope = ropeattn.RotaryEmbedding(32, theta=1e6)
    inputs = [sample_inputs(i) for i in range(8)]
    expect = [(ropeattn.apply_rotary(x, 5, rope=rope), ropeattn.attention(x, k, k))
              for x, k in inputs]

    def work(i, ctx):
        x, k = inputs[i]
        for _ in range(20):
            got = (ropeattn.apply_rotary(x, 5, rope=rope, context=ctx),
                   ropeattn.attention(x, k, k, context=ctx))
            if not all(np.array_equal(g, e) for g, e in zip(got, expect[i])):
                return False
        return True

    errors = run_in_threads(work)
    assert errors == []


def calls(x, k, rope, ctx):
    ropeattn.apply_rotary(x, np.arange(x.shape[1]), rope=rope, context=ctx)
    ropeattn.apply_rotary(x, out=x, rope=rope)
    ropeattn.attention(x, k, k, sinks=np.zeros(4, np.float32), context=ctx)
    rope.cos_sin(np.arange(8))
    rope.inv_freq
    for bad in (lambda: ropeattn.apply_rotary(x, 2**32, rope=rope),
                lambda: ropeattn.RotaryEmbedding(7)):
        try:
            bad()
        except ropeattn.Error:
            pass


def test_no_reference_or_memory_growth():
    x, k = sample_inputs(0)
    x = x[:, :8]
    k = k[:, :8]
    rope = ropeattn.RotaryEmbedding(32)
    with ropeattn.Context(threads=1) as ctx:
        refs = [sys.getrefcount(o) for o in (x, k, rope, ctx)]
        for _ in range(50):  # warm caches
            calls(x, k, rope, ctx)
        tracemalloc.start()
        for _ in range(50):
            calls(x, k, rope, ctx)
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(1000):
            calls(x, k, rope, ctx)
        grown = tracemalloc.get_traced_memory()[0] - before
        tracemalloc.stop()
        assert [sys.getrefcount(o) for o in (x, k, rope, ctx)] == refs
    # a leak of one small object per call would be > 50 kB over 1000 calls
    assert grown < 16384, grown


def test_gil_released_during_kernels():
    """While one thread runs a long attention (about 0.2-1 s here), the main
    thread sleeps 1 ms at a time and counts its wake-ups: each needs the
    GIL back, so a kernel holding it would allow one or two (before and
    after the call), where a released GIL allows about one per millisecond.
    At least 10 leaves a wide margin for a loaded machine, without timing
    anything against a limit."""
    q = np.random.default_rng(1).standard_normal((1, 4096, 8, 64)).astype(np.float32)
    wakeups = wakeups_during(lambda: ropeattn.attention(q, q, q))
    assert wakeups >= 10, wakeups


def test_default_context_runs_on_the_processors():
    """context=None: a default Context of one thread per processor this
    process may run on (its affinity mask), made on first use and shared,
    its worker threads seen in /proc (processors - 1 more threads after a
    first call); the same bits as one thread, two or three."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert ropeattn._ropeattn.default_context().threads == cpus
    assert ropeattn._ropeattn.default_context() is ropeattn._ropeattn.default_context()
    if os.path.isdir("/proc/self/task"):
        code = ("import os, numpy as np, ropeattn\n"
                "n = len(os.listdir('/proc/self/task'))\n"
                "q = np.ones((1, 8, 2, 8), np.float32)\n"
                "ropeattn.attention(q, q, q)\n"
                "print(len(os.listdir('/proc/self/task')) - n)\n")
        grown = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                               text=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
        assert int(grown.stdout) == cpus - 1
    x, k = sample_inputs(3)
    want = (ropeattn.apply_rotary(x, 7), ropeattn.attention(x, k, k, window=9))
    for threads in (1, 2, 3):
        with ropeattn.Context(threads) as ctx:
            got = (ropeattn.apply_rotary(x, 7, context=ctx),
                   ropeattn.attention(x, k, k, window=9, context=ctx))
        assert all(np.array_equal(g, w) for g, w in zip(got, want)), threads
    with pytest.raises(ropeattn.Error, match="shared"):  # closing it would stop every call
        ropeattn._ropeattn.default_context().close()


def _attend_in_child(queue):
    q = np.ones((1, 8, 2, 8), np.float32)
    queue.put(float(ropeattn.attention(q, q, q).sum()))


def test_default_context_in_a_forked_child():
    """A child forked after the parent used the default makes its own (the
    parent's worker threads are not in the child)."""
    q = np.ones((1, 8, 2, 8), np.float32)
    want = float(ropeattn.attention(q, q, q).sum())
    fork = multiprocessing.get_context("fork")
    queue = fork.Queue()
    child = fork.Process(target=_attend_in_child, args=(queue,))
    child.start()
    child.join(60)
    assert child.exitcode == 0 and queue.get(timeout=1) == want
