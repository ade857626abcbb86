"""The kernel cache: memory and disk hits, keys, corruption and atomic writes."""

from __future__ import annotations

import pytest

from kernels_cases import needs_nvrtc
from nvmathpy.kernels.kernel_cache import KernelCache, compile_kernel, default_kernel_cache
from nvmathpy.plan import cache_dir

pytestmark = needs_nvrtc

SOURCE = 'extern "C" __global__ void nvm_scale(float* x, float s) { x[threadIdx.x] *= s; }'


def test_miss_then_memory_hit_then_disk_hit():
    cache = KernelCache()
    first = cache.compile(SOURCE, "sm_90")
    assert (cache.compiles, cache.memory_hits, cache.disk_hits) == (1, 0, 0)
    assert cache.compile(SOURCE, "sm_90") is first and cache.memory_hits == 1
    cache.clear_memory()
    again = cache.compile(SOURCE, "sm_90")
    assert (cache.compiles, cache.disk_hits) == (1, 1)
    assert again == first and again.resources["nvm_scale"].registers > 0
    fresh = KernelCache()  # another process's view: the same file answers
    assert fresh.compile(SOURCE, "sm_90") == first and fresh.compiles == 0


def test_entries_live_under_the_cache_dir_named_by_content_hash(isolated_cache):
    cache = KernelCache()
    cache.compile(SOURCE, "sm_80")
    key = cache.key(SOURCE, "sm_80")
    assert cache.directory == cache_dir() / "kernels" and str(cache.directory).startswith(str(isolated_cache))
    assert [p.name for p in cache.directory.iterdir()] == [f"{key}.nvmk"]  # no temporary file left behind


def test_key_changes_with_source_arch_output_and_options():
    key = KernelCache.key(SOURCE, "sm_90")
    others = {KernelCache.key(SOURCE + " ", "sm_90"), KernelCache.key(SOURCE, "sm_80"),
              KernelCache.key(SOURCE, "sm_90", output="ltoir"), KernelCache.key(SOURCE, "sm_90", options=["-O3"]),
              KernelCache.key(SOURCE, "sm_90", options=["--use_fast_math"])}
    assert key not in others and len(others) == 5
    assert KernelCache.key(SOURCE, "sm_90") == key


def test_different_options_compile_separately():
    cache = KernelCache()
    plain = cache.compile(SOURCE, "sm_90")
    fast = cache.compile(SOURCE, "sm_90", options=["--use_fast_math"])
    ltoir = cache.compile(SOURCE, "sm_90", output="ltoir")
    assert cache.compiles == 3 and plain.kind == "cubin" and ltoir.kind == "ltoir" and fast.kind == "cubin"
    assert len(list(cache.directory.glob("*.nvmk"))) == 3


@pytest.mark.parametrize("damage", ["garbage", "truncated", "flipped", "empty"])
def test_corrupt_entry_is_ignored_with_a_warning_and_rebuilt(damage):
    cache = KernelCache()
    good = cache.compile(SOURCE, "sm_90")
    path = cache.path(cache.key(SOURCE, "sm_90"))
    raw = path.read_bytes()
    path.write_bytes({"garbage": b"not a cubin at all", "truncated": raw[: len(raw) // 2],
                      "flipped": raw[:-10] + bytes([raw[-10] ^ 0xFF]) + raw[-9:], "empty": b""}[damage])
    cache.clear_memory()
    with pytest.warns(UserWarning, match="corrupt kernel cache entry"):
        rebuilt = cache.compile(SOURCE, "sm_90")
    assert rebuilt.code == good.code and cache.compiles == 2
    cache.clear_memory()
    assert cache.compile(SOURCE, "sm_90").code == good.code and cache.disk_hits == 1  # the rewritten entry is good


def test_unwritable_directory_warns_and_still_compiles(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    cache = KernelCache(blocker / "kernels")
    with pytest.warns(UserWarning) as record:
        compiled = cache.compile(SOURCE, "sm_90")
    assert compiled.kind == "cubin"
    assert any("cannot write kernel cache entry" in str(w.message) for w in record)


def test_default_cache_and_compile_kernel():
    before = default_kernel_cache().compiles
    compile_kernel(SOURCE + "// default", "sm_90")
    compile_kernel(SOURCE + "// default", "sm_90")
    assert default_kernel_cache().compiles <= before + 1


def test_swapped_entries_are_recompiled_not_used():
    """Two entries swapped on disk: each source gets its own code back (the header names the key)."""
    import os

    other = SOURCE.replace("*= s", "+= s")
    cache = KernelCache()
    first, second = cache.compile(SOURCE, "sm_90"), cache.compile(other, "sm_90")
    a, b = cache.path(cache.key(SOURCE, "sm_90")), cache.path(cache.key(other, "sm_90"))
    tmp = a.with_suffix(".swap")
    os.replace(a, tmp), os.replace(b, a), os.replace(tmp, b)
    fresh = KernelCache()
    with pytest.warns(UserWarning, match="written for key"):
        assert fresh.compile(SOURCE, "sm_90").code == first.code
    with pytest.warns(UserWarning, match="written for key"):
        assert fresh.compile(other, "sm_90").code == second.code
    assert first.code != second.code
    assert fresh.compiles == 2


def test_a_fifo_in_place_of_an_entry_never_blocks():
    import os

    cache = KernelCache()
    path = cache.path(cache.key(SOURCE, "sm_90"))
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)
    with pytest.warns(UserWarning, match="not a regular file"):
        cache.compile(SOURCE, "sm_90")
    assert cache.compiles == 1
