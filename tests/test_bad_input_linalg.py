"""Bad input for every public function of ``nvmathpy.linalg`` and ``nvmathpy.scipy.linalg``:
malformed shapes, every NumPy dtype kind in both byte orders, layouts, sizes 0, 1 and huge by
broadcasting, NaN/Inf and bad factor tuples, plus freed plans (cases in bad_input_cases.py).

Each case asserts one outcome: NumPy's/SciPy's result (relative norm error) or a clear
exception of the expected type naming the argument; never a crash, a hang or a silently wrong
value. The cases run in worker subprocesses, many per worker, one JSON line per case: a case
that kills its worker (a segfault) or hangs fails alone, and the rest run on in a fresh worker.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import threading

import pytest

from bad_input_cases import case_ids

HERE = os.path.dirname(os.path.abspath(__file__))
WORKER = os.path.join(HERE, "bad_input_cases.py")
#: Seconds a case may run before it counts as hung (the cases take milliseconds).
CASE_TIMEOUT = 30
IDS = case_ids()


def _run_worker(ids: list[str], env: dict[str, str], results: dict[str, dict]) -> None:
    """Run ``ids`` in workers until each has a result; a worker that dies, or stays silent on
    one case for :data:`CASE_TIMEOUT` seconds, marks the case in flight failed and a fresh
    worker takes the rest."""
    pending = list(ids)
    while pending:
        proc = subprocess.Popen([sys.executable, WORKER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env, cwd=os.path.dirname(HERE))
        lines: queue.Queue = queue.Queue()
        errors: list[str] = []
        threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout] + [lines.put(None)],
                         daemon=True).start()
        threading.Thread(target=lambda: errors.append(proc.stderr.read()), daemon=True).start()
        proc.stdin.write(json.dumps(pending))
        proc.stdin.close()
        in_flight, hung = None, False
        while True:
            try:
                line = lines.get(timeout=CASE_TIMEOUT)
            except queue.Empty:
                hung = True
                proc.kill()
                break
            if line is None:
                break
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if record.get("start"):
                in_flight = record["id"]
            else:
                results[record["id"]] = record
                in_flight = None
        proc.wait()
        err = errors[0] if errors else ""
        if in_flight is not None:
            how = "hung (killed)" if hung else f"crashed the worker (exit {proc.returncode})"
            results[in_flight] = {"id": in_flight, "ok": False, "detail": f"{how}; stderr: {err[-400:]}"}
        elif not any(cid in results for cid in pending):
            for cid in pending:
                detail = f"the worker failed (exit {proc.returncode}): {err[-400:]}"
                results[cid] = {"id": cid, "ok": False, "detail": detail}
        pending = [cid for cid in pending if cid not in results]


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, dict]:
    env = dict(os.environ)
    env["NVMATHPY_CACHE_DIR"] = str(tmp_path_factory.mktemp("bad-input-cache"))
    env["NVMATHPY_WISDOM"] = "off"
    env["PYTHONFAULTHANDLER"] = "1"
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    results: dict[str, dict] = {}
    halves = [IDS[0::2], IDS[1::2]]  # two workers side by side
    threads = [threading.Thread(target=_run_worker, args=(half, env, results)) for half in halves]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


@pytest.mark.parametrize("case", IDS)
def test_bad_input(case: str, outcomes: dict[str, dict]) -> None:
    record = outcomes.get(case)
    assert record is not None, f"{case}: no result"
    assert record["ok"], f"{case}: {record['detail']}"


def test_worker_reports_a_crash_and_a_hang_and_goes_on(tmp_path) -> None:
    """The protocol itself: a case that kills its worker, or hangs, fails alone; the cases
    after it still run (in a fresh worker)."""
    script = tmp_path / "crashy.py"
    script.write_text(
        "import json, os, sys, time\n"
        "for cid in json.loads(sys.stdin.read()):\n"
        "    print(json.dumps({'id': cid, 'start': True}), flush=True)\n"
        "    if cid == 'boom':\n"
        "        os.abort()\n"
        "    if cid == 'stuck':\n"
        "        time.sleep(600)\n"
        "    print(json.dumps({'id': cid, 'ok': True, 'detail': 'fine'}), flush=True)\n"
    )
    global WORKER, CASE_TIMEOUT
    saved = WORKER, CASE_TIMEOUT
    WORKER, CASE_TIMEOUT = str(script), 3
    try:
        results: dict[str, dict] = {}
        _run_worker(["one", "boom", "two", "stuck", "three"], dict(os.environ), results)
    finally:
        WORKER, CASE_TIMEOUT = saved
    assert results["one"]["ok"] and results["two"]["ok"] and results["three"]["ok"]
    assert not results["boom"]["ok"] and "crashed" in results["boom"]["detail"]
    assert not results["stuck"]["ok"] and "hung" in results["stuck"]["detail"]
