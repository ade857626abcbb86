"""Dask benchmark: nvmathpy.dask beside dask.array with its NumPy kernels, on a LocalCluster.

Cases: a batched FFT, a batched GEMM (plain and with a fused relu+bias epilogue) and a
tall-and-skinny QR / least squares. Each pair computes the same lazy expression over the
same persisted input on a ``LocalCluster(n_workers=2, threads_per_worker=1,
processes=True)`` (worker processes, as a real deployment; their nannies set the BLAS/OpenMP
threads to 1, and nvmathpy is told ``num_threads=1`` per task). A timing is the wall time of
``persist`` + ``wait`` of the result (no transfer back to the client). One warm-up round, then
rounds interleaving the two sides; medians are reported as a markdown table with the ratio
``dask+NumPy / nvmathpy`` (above 1: nvmathpy faster).

Run (CPU benchmarks only, with these two variables unset)::

    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE .venv/bin/python benchmarks/bench_dask.py [--rounds 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)  # run from a checkout
os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [ROOT, os.environ.get("PYTHONPATH")]))  # the workers too


def cases(da: Any, nd: Any, client: Any) -> list[tuple[str, Callable[[], Any], Callable[[], Any]]]:
    """(label, nvmathpy expression builder, dask+NumPy expression builder) over persisted inputs."""
    rng = da.random.default_rng(0)
    signals = (rng.standard_normal((512, 8192), chunks=(64, 8192))
               + 1j * rng.standard_normal((512, 8192), chunks=(64, 8192))).persist()
    real = rng.standard_normal((512, 8192), chunks=(64, 8192)).astype(np.float32).persist()
    mats = rng.standard_normal((64, 384, 384), chunks=(8, 384, 384)).persist()
    weight = np.random.default_rng(1).standard_normal((384, 384))
    bias = np.random.default_rng(2).standard_normal(384)
    tall = rng.standard_normal((400_000, 32), chunks=(50_000, 32)).persist()
    rhs = rng.standard_normal(400_000, chunks=50_000).persist()
    client.wait_for_workers(2)
    from distributed import wait

    wait([signals, real, mats, tall, rhs])
    return [
        ("FFT c2c 512 x 8192 (8 chunks)", lambda: nd.fft(signals), lambda: da.fft.fft(signals)),
        ("FFT r2c float32 512 x 8192", lambda: nd.rfft(real), lambda: da.fft.rfft(real)),
        ("GEMM 64 x 384^3 (8 chunks)", lambda: nd.matmul(mats, weight), lambda: da.matmul(mats, weight)),
        ("GEMM + relu_bias", lambda: nd.matmul(mats, weight, bias=bias, epilogue="relu_bias"),
         lambda: da.maximum(da.matmul(mats, weight) + bias, 0.0)),
        ("TSQR 400000 x 32 (8 chunks)", lambda: nd.qr(tall), lambda: da.linalg.tsqr(tall)),
        ("lstsq 400000 x 32", lambda: nd.lstsq(tall, rhs)[0], lambda: da.linalg.lstsq(tall, rhs)[0]),
    ]


def run_once(client: Any, build: Callable[[], Any]) -> float:
    from distributed import wait

    start = time.perf_counter()
    result = client.persist(build())
    wait(result)
    elapsed = time.perf_counter() - start
    del result
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds per case (after one warm-up)")
    args = parser.parse_args()

    import dask.array as da
    import threadpoolctl
    from distributed import Client, LocalCluster

    import nvmathpy.dask as nd

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None) as cluster, \
            Client(cluster) as client:
        info = next(iter(client.run(threadpoolctl.threadpool_info).values()))
        blas = [f"{i['internal_api']} {i.get('architecture')} threads={i['num_threads']}" for i in info
                if i["user_api"] == "blas"]
        print(f"cluster: 2 worker processes x 1 thread; worker BLAS: {sorted(set(blas))}")
        rows = []
        for label, ours, theirs in cases(da, nd, client):
            run_once(client, ours), run_once(client, theirs)  # warm-up: plans, imports
            times: dict[str, list[float]] = {"nvmathpy": [], "dask": []}
            for _ in range(args.rounds):
                times["nvmathpy"].append(run_once(client, ours))
                times["dask"].append(run_once(client, theirs))
            med = {k: statistics.median(v) for k, v in times.items()}
            rows.append((label, med["nvmathpy"], med["dask"], med["dask"] / med["nvmathpy"]))
            print(f"  {label}: nvmathpy {med['nvmathpy'] * 1e3:.1f} ms, dask {med['dask'] * 1e3:.1f} ms", flush=True)
        print("\n| case | nvmathpy.dask (ms) | dask + NumPy (ms) | ratio dask/nvmathpy |")
        print("|---|---:|---:|---:|")
        for label, ours, theirs, ratio in rows:
            print(f"| {label} | {ours * 1e3:.1f} | {theirs * 1e3:.1f} | {ratio:.2f} |")
        print(f"\nmedians of {args.rounds} rounds; nvmathpy plans per worker: "
              f"{next(iter(client.run(nd.plan_cache_stats).values()))}")


if __name__ == "__main__":
    main()
