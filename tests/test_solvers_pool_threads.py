"""NumPy's OpenBLAS stepped down to the free cores around a large factorization
(nvmathpy/linalg/solvers/cpu/_pool_threads.py): which count each situation gets, that the count
is restored, that the workers are learned only from a clean observation, and that the results
of the stepped-down routines are right."""

from __future__ import annotations

import os
import threading
import warnings

import numpy as np
import pytest

from nvmathpy.linalg.solvers.cpu import _numpy_lapack as numpy_lapack
from nvmathpy.linalg.solvers.cpu import _pool_threads as pool


@pytest.fixture(autouse=True)
def enabled(monkeypatch):
    """The mechanism on (the suite runs with NVMATHPY_FREE_CORES=off, see conftest.py)."""
    monkeypatch.setattr(pool, "ENABLED", True)


class FakeCount:
    """OpenBLAS's thread count: ``set`` calls recorded, the count seen by the call kept."""

    def __init__(self, count: int) -> None:
        self.count, self.sets, self.seen = count, [], None

    def get(self) -> int:
        return self.count

    def put(self, count: int) -> None:
        self.sets.append(count)
        self.count = count

    def call(self) -> str:
        self.seen = self.count
        return "result"


@pytest.fixture
def fake(monkeypatch):
    """NumPy's pool: two OpenBLAS threads; two cores; SciPy's pool absent; another thread
    running somewhere (so the process's threads are looked at); no workers learned yet."""
    count = FakeCount(2)
    monkeypatch.setattr(pool, "thread_count_functions", lambda: (count.get, count.put))
    monkeypatch.setattr(pool.SCIPY, "functions", lambda: None)
    monkeypatch.setattr(pool, "_cores", lambda: 2)
    monkeypatch.setattr(pool, "_running_anywhere", lambda: 2)
    for each in pool.POOLS:
        monkeypatch.setattr(each, "workers", None)
        monkeypatch.setattr(each, "_probes", (0, 0))
    return count


def running(monkeypatch, *sequence: frozenset[str]) -> None:
    """``running_threads()`` answers the given sets in turn (the last one from then on)."""
    answers = list(sequence)
    monkeypatch.setattr(pool, "running_threads", lambda: answers.pop(0) if len(answers) > 1 else answers[0])


def test_a_quiet_machine_keeps_the_count_and_learns_the_workers_once(fake, monkeypatch):
    monkeypatch.setattr(pool, "_running_anywhere", lambda: 1)  # the caller alone
    probes = []
    monkeypatch.setattr(pool.NUMPY, "probe", lambda: probes.append(1))
    running(monkeypatch, frozenset(), frozenset({"101"}))  # before the probe, and what it left running
    assert pool.stepped_down(fake.call) == "result"
    assert (fake.seen, fake.sets) == (2, [])
    assert pool.NUMPY.workers == (os.getpid(), frozenset({"101"}))
    pool.stepped_down(fake.call)
    assert probes == [1]


def test_a_call_that_may_not_learn_probes_nothing(fake, monkeypatch):
    monkeypatch.setattr(pool, "_running_anywhere", lambda: 1)
    probes = []
    monkeypatch.setattr(pool.NUMPY, "probe", lambda: probes.append(1))
    running(monkeypatch, frozenset())
    pool.stepped_down(fake.call, learn=False)
    assert probes == [] and fake.seen == 2 and pool.NUMPY.workers is None


def test_a_probe_that_shows_other_threads_teaches_nothing(fake, monkeypatch):
    monkeypatch.setattr(pool, "_running_anywhere", lambda: 1)
    monkeypatch.setattr(pool.NUMPY, "probe", lambda: None)
    running(monkeypatch, frozenset(), frozenset({"101", "303"}))  # more than its one worker
    pool.stepped_down(fake.call)
    assert pool.NUMPY.workers is None


def _scipy_pool(monkeypatch) -> list[int]:
    """SciPy's pool present with two threads and NumPy's worker "101" known; the probes made."""
    scipy_count = FakeCount(2)
    monkeypatch.setattr(pool.SCIPY, "functions", lambda: (scipy_count.get, scipy_count.put))
    monkeypatch.setattr(pool.NUMPY, "workers", (os.getpid(), frozenset({"101"})))
    probes: list[int] = []
    monkeypatch.setattr(pool.SCIPY, "probe", lambda: probes.append(1))
    return probes


def test_the_other_pools_workers_are_learned_beside_a_known_spinning_worker(fake, monkeypatch):
    """NumPy's known worker spins: a busy call probes SciPy's pool and learns its new running
    thread; a smaller one probes nothing (SciPy's worker would wait for the taken core)."""
    probes = _scipy_pool(monkeypatch)
    running(monkeypatch, frozenset({"101"}))
    pool.stepped_down(fake.call, pool.POOLS)
    assert probes == [] and pool.SCIPY.workers is None
    running(monkeypatch, frozenset({"101"}), frozenset({"101"}), frozenset({"101", "202"}))
    pool.stepped_down(fake.call, pool.POOLS, busy_learn=True)
    assert probes == [1] and pool.SCIPY.workers == (os.getpid(), frozenset({"202"}))


@pytest.mark.parametrize("busy", [False, True])
def test_workers_spinning_already_are_learned_when_the_probe_wakes_none(fake, monkeypatch, busy):
    """Right after a SciPy call its worker spins: a probe of SciPy's pool wakes no other thread,
    so the unknown thread running before and after it is SciPy's worker (a foreign thread
    would have left SciPy's sleeping worker to wake and show up as new); any call may learn so."""
    probes = _scipy_pool(monkeypatch)
    running(monkeypatch, frozenset({"303"}))  # before the look, the probe, and after it
    pool.stepped_down(fake.call, pool.POOLS, busy_learn=busy)
    assert probes == [1] and pool.SCIPY.workers == (os.getpid(), frozenset({"303"}))


def test_a_smaller_call_probes_only_scipys_pool_beside_an_unknown_running_thread(fake, monkeypatch):
    """Without ``busy_learn`` (calls below BUSY_LEARN_FROM elements) an unknown running thread
    allows no probe of NumPy's pool while SciPy's workers are unknown (the thread may be
    SciPy's, and NumPy's worker would wait for its core): SciPy's alone is probed, and the call
    steps down beside the thread it did not place. With every other pool known, NumPy's pool
    is probed beside it (it may be NumPy's own spinning worker); here it is not, and the probe
    learns the worker it woke."""
    probes = _scipy_pool(monkeypatch)
    monkeypatch.setattr(pool.NUMPY, "workers", None)
    numpy_probes: list[int] = []
    monkeypatch.setattr(pool.NUMPY, "probe", lambda: numpy_probes.append(1))
    running(monkeypatch, frozenset({"303"}), frozenset({"303"}), frozenset({"303", "202"}))
    pool.stepped_down(fake.call, pool.POOLS)
    assert (probes, numpy_probes) == ([1], []) and pool.SCIPY.workers == (os.getpid(), frozenset({"202"}))
    assert pool.NUMPY.workers is None and fake.seen == 1
    monkeypatch.setattr(pool.SCIPY, "functions", lambda: None)  # NumPy's pool alone
    running(monkeypatch, frozenset({"303"}), frozenset({"303"}), frozenset({"303", "101"}))
    pool.stepped_down(fake.call)
    assert numpy_probes == [1] and pool.NUMPY.workers == (os.getpid(), frozenset({"101"})) and fake.seen == 1


def test_numpys_spinning_worker_is_learned_beside_scipys_known_one(fake, monkeypatch):
    """SciPy's worker known and spinning beside one unknown thread (NumPy's worker spins too
    where calls use both pools): a call that is not busy probes NumPy's pool, which wakes none,
    and learns that thread; beside no unknown thread it probes nothing (NumPy's sleeping
    worker would wait for the core SciPy's holds)."""
    _scipy_pool(monkeypatch)
    monkeypatch.setattr(pool, "_running_anywhere", lambda: 3)
    monkeypatch.setattr(pool.SCIPY, "workers", (os.getpid(), frozenset({"202"})))
    monkeypatch.setattr(pool.NUMPY, "workers", None)
    numpy_probes: list[int] = []
    monkeypatch.setattr(pool.NUMPY, "probe", lambda: numpy_probes.append(1))
    running(monkeypatch, frozenset({"202"}))
    pool.stepped_down(fake.call, pool.POOLS)
    assert numpy_probes == [] and pool.NUMPY.workers is None
    running(monkeypatch, frozenset({"202", "101"}))  # before the look, the probe, and after it
    pool.stepped_down(fake.call, pool.POOLS)
    assert numpy_probes == [1] and pool.NUMPY.workers == (os.getpid(), frozenset({"101"}))


def test_a_quiet_call_learns_one_pool_scipys_first(fake, monkeypatch):
    """Nothing running, both pools unknown: a call that is not busy probes one pool (a second
    probe's worker would wait for the core the first one's spinning worker holds), SciPy's
    first; a later quiet call learns NumPy's."""
    monkeypatch.setattr(pool, "_running_anywhere", lambda: 1)
    probes = _scipy_pool(monkeypatch)
    monkeypatch.setattr(pool.NUMPY, "workers", None)
    numpy_probes: list[int] = []
    monkeypatch.setattr(pool.NUMPY, "probe", lambda: numpy_probes.append(1))
    running(monkeypatch, frozenset(), frozenset({"202"}))  # before the probe, and after it
    pool.stepped_down(fake.call, pool.POOLS)
    assert (probes, numpy_probes) == ([1], []) and pool.SCIPY.workers == (os.getpid(), frozenset({"202"}))
    running(monkeypatch, frozenset(), frozenset({"101"}))
    pool.stepped_down(fake.call, pool.POOLS)
    assert (probes, numpy_probes) == ([1], [1]) and pool.NUMPY.workers == (os.getpid(), frozenset({"101"}))


def test_known_workers_that_are_all_that_runs_spare_the_scan(fake, monkeypatch):
    """Every pool's workers known and, by the load count, all that runs: only they are read
    (a few small files), not every thread of the process; the call keeps its count."""
    scipy_count = FakeCount(2)
    monkeypatch.setattr(pool.SCIPY, "functions", lambda: (scipy_count.get, scipy_count.put))
    monkeypatch.setattr(pool.SCIPY, "workers", (os.getpid(), frozenset({"202"})))
    monkeypatch.setattr(pool.NUMPY, "workers", (os.getpid(), frozenset({"101"})))
    monkeypatch.setattr(pool, "running_among", lambda names: names & {"202"})

    def no_scan():
        raise AssertionError("every thread was read")

    monkeypatch.setattr(pool, "running_threads", no_scan)
    seen = pool.stepped_down(lambda: (fake.count, scipy_count.count), pool.POOLS)
    assert seen == (1, 2) and scipy_count.sets == [] and fake.count == 2
    monkeypatch.setattr(pool, "_running_anywhere", lambda: 3)  # one more thread than the workers
    with pytest.raises(AssertionError, match="every thread"):
        pool.stepped_down(fake.call, pool.POOLS)


def test_a_foreign_thread_beside_the_probe_is_not_learned(fake, monkeypatch):
    """A foreign thread spins while SciPy's worker sleeps: the probe wakes the worker, which
    is learned, and the foreign thread still steps the call down."""
    probes = _scipy_pool(monkeypatch)
    running(monkeypatch, frozenset({"303"}), frozenset({"303"}), frozenset({"303", "202"}))
    pool.stepped_down(fake.call, pool.POOLS, busy_learn=True)
    assert probes == [1] and pool.SCIPY.workers == (os.getpid(), frozenset({"202"}))
    assert fake.sets == [1, 2]  # NumPy's count: "303" and SciPy's worker "202" hold the cores


def test_more_unknown_threads_than_workers_prevent_any_probe(fake, monkeypatch):
    probes = _scipy_pool(monkeypatch)
    running(monkeypatch, frozenset({"303", "404"}))  # SciPy's pool has one worker: not all can be its
    pool.stepped_down(fake.call, pool.POOLS, busy_learn=True)
    assert probes == [] and pool.SCIPY.workers is None


def test_both_pools_spinning_spend_no_probe_and_are_learned_when_one_spins_alone(fake, monkeypatch):
    """Neither pool known, both pools' workers spinning (a SciPy call, then one on NumPy's
    pool): a probe would wake no new thread and could not tell whose they are, so none is made
    or counted - every one of them was once spent so, and the workers were never learned. When
    SciPy's worker alone spins, a busy call learns both."""
    probes = _scipy_pool(monkeypatch)
    monkeypatch.setattr(pool.NUMPY, "workers", None)
    numpy_probes = []
    monkeypatch.setattr(pool.NUMPY, "probe", lambda: numpy_probes.append(1))
    running(monkeypatch, frozenset({"303", "404"}))
    for _ in range(pool.PROBES + 1):
        pool.stepped_down(fake.call, pool.POOLS, busy_learn=True)
    assert probes == numpy_probes == [] and pool.SCIPY.probes_left() == pool.NUMPY.probes_left() == pool.PROBES
    # SciPy's "303" alone: NumPy's probe wakes "404", SciPy's wakes none ("303" was spinning)
    running(monkeypatch, frozenset({"303"}), frozenset({"303"}), frozenset({"303", "404"}))
    pool.stepped_down(fake.call, pool.POOLS, busy_learn=True)
    assert numpy_probes == probes == [1]
    assert pool.NUMPY.known_workers() == {"404"} and pool.SCIPY.known_workers() == {"303"}


def test_a_thread_that_stops_during_the_probe_is_not_learned(fake, monkeypatch):
    probes = _scipy_pool(monkeypatch)
    running(monkeypatch, frozenset({"303"}), frozenset({"303"}), frozenset())
    pool.stepped_down(fake.call, pool.POOLS, busy_learn=True)
    assert probes == [1] and pool.SCIPY.workers is None


def test_probes_stop_after_a_few_that_show_nothing(fake, monkeypatch):
    """A pool whose probes keep showing nothing usable is probed at most PROBES times."""
    probes = _scipy_pool(monkeypatch)
    woken = []  # each probe leaves two new threads running where SciPy's pool has one worker
    monkeypatch.setattr(pool.SCIPY, "probe", lambda: (probes.append(1), woken.append(1)))
    monkeypatch.setattr(pool, "running_threads",
                        lambda: frozenset({"101", "202", "203"}) if woken and not woken.clear() else frozenset({"101"}))
    for _ in range(pool.PROBES + 3):
        pool.stepped_down(fake.call, pool.POOLS, busy_learn=True)
    assert len(probes) == pool.PROBES and pool.SCIPY.workers is None


def test_no_probe_while_another_caller_changes_counts(fake, monkeypatch):
    probes = _scipy_pool(monkeypatch)
    running(monkeypatch, frozenset({"303"}))
    with pool.THREAD_COUNT:
        pool.stepped_down(fake.call, pool.POOLS, busy_learn=True)
    assert probes == [] and pool.SCIPY.workers is None


def test_while_scipys_pool_alone_spins_the_call_runs_on_it_instead(fake, monkeypatch):
    """SciPy's known worker alone running: the call's SciPy twin runs, on SciPy's full count;
    with a foreign thread beside it, or with no twin, NumPy's call runs stepped down."""
    scipy_count = FakeCount(2)
    monkeypatch.setattr(pool.SCIPY, "functions", lambda: (scipy_count.get, scipy_count.put))
    monkeypatch.setattr(pool.SCIPY, "workers", (os.getpid(), frozenset({"202"})))
    monkeypatch.setattr(pool.NUMPY, "workers", (os.getpid(), frozenset({"101"})))
    running(monkeypatch, frozenset({"202"}))
    assert pool.stepped_down(fake.call, instead=scipy_count.call) == "result"
    assert (scipy_count.seen, fake.seen, fake.sets, scipy_count.sets) == (2, None, [], [])
    running(monkeypatch, frozenset({"202", "303"}))
    pool.stepped_down(fake.call, instead=scipy_count.call)
    assert fake.seen == 1 and scipy_count.seen == 2 and scipy_count.sets == []
    running(monkeypatch, frozenset({"202"}))
    fake.seen = None
    pool.stepped_down(fake.call)
    assert fake.seen == 1


def test_a_call_with_a_twin_learns_scipys_workers_too(fake, monkeypatch):
    """A NumPy's-pool call with a SciPy twin, SciPy's worker spinning unknown: SciPy's pool is
    probed (its worker learned as the one already running) and the twin runs."""
    probes = _scipy_pool(monkeypatch)
    twin = FakeCount(2)
    running(monkeypatch, frozenset({"202"}))
    assert pool.stepped_down(fake.call, instead=twin.call, busy_learn=True) == "result"
    assert probes == [1] and pool.SCIPY.workers == (os.getpid(), frozenset({"202"}))
    assert twin.seen == 2 and fake.seen is None


def test_the_twin_on_scipys_pool_steps_down_for_other_processes(fake, monkeypatch):
    scipy_count = FakeCount(2)
    monkeypatch.setattr(pool.SCIPY, "functions", lambda: (scipy_count.get, scipy_count.put))
    monkeypatch.setattr(pool.SCIPY, "workers", (os.getpid(), frozenset({"202"})))
    monkeypatch.setattr(pool, "_running_anywhere", lambda: 3)  # the caller, SciPy's worker, one elsewhere
    running(monkeypatch, frozenset({"202"}))
    pool.stepped_down(fake.call, instead=scipy_count.call, learn=False)
    assert (scipy_count.seen, scipy_count.sets, scipy_count.count) == (1, [1, 2], 2)


def test_a_foreign_running_thread_steps_down_to_one_and_restores(fake, monkeypatch):
    running(monkeypatch, frozenset({"202"}))
    assert pool.stepped_down(fake.call, learn=False) == "result"
    assert (fake.seen, fake.sets, fake.count) == (1, [1, 2], 2)


def test_its_own_spinning_workers_do_not_step_it_down(fake, monkeypatch):
    monkeypatch.setattr(pool.NUMPY, "workers", (os.getpid(), frozenset({"101"})))
    running(monkeypatch, frozenset({"101"}))
    pool.stepped_down(fake.call)
    assert (fake.seen, fake.sets) == (2, [])
    running(monkeypatch, frozenset({"101", "202"}))  # its worker and another pool's
    pool.stepped_down(fake.call)
    assert (fake.seen, fake.sets) == (1, [1, 2])


def test_each_pool_counts_the_others_workers_as_foreign(fake, monkeypatch):
    """NumPy's worker spinning: a call that may run on either pool gets SciPy's stepped down
    to one thread and NumPy's left at two."""
    scipy_count = FakeCount(2)
    monkeypatch.setattr(pool.SCIPY, "functions", lambda: (scipy_count.get, scipy_count.put))
    monkeypatch.setattr(pool.NUMPY, "workers", (os.getpid(), frozenset({"101"})))
    monkeypatch.setattr(pool.SCIPY, "workers", (os.getpid(), frozenset({"202"})))
    running(monkeypatch, frozenset({"101"}))
    seen = pool.stepped_down(lambda: (fake.count, scipy_count.count), pool.POOLS)
    assert seen == (2, 1)
    assert (fake.sets, scipy_count.sets) == ([], [1, 2])


def test_workers_learned_in_another_process_count_as_foreign(fake, monkeypatch):
    monkeypatch.setattr(pool.NUMPY, "workers", (os.getpid() + 1, frozenset({"101"})))
    running(monkeypatch, frozenset({"101"}))
    pool.stepped_down(fake.call, learn=False)
    assert fake.seen == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork here")
def test_a_forked_child_knows_its_own_process_id():
    """The process id is kept without a system call a look, and a forked child (whose threads are
    others) gets its own: it is what tells the workers learned in the parent from the child's."""
    from nvmathpy.kernels.cpu_gemm import process_id

    parent = os.getpid()
    assert process_id() == parent
    read, write = os.pipe()
    with warnings.catch_warnings():  # (Python 3.12 warns of fork in a process with threads; the child only writes)
        warnings.simplefilter("ignore", DeprecationWarning)
        child = os.fork()
    if child == 0:  # the child reports whether it sees its own id, then leaves at once
        os.write(write, b"1" if process_id() == os.getpid() != parent else b"0")
        os._exit(0)
    os.waitpid(child, 0)
    assert os.read(read, 1) == b"1"


def test_busy_processes_elsewhere_step_it_down(fake, monkeypatch):
    running(monkeypatch, frozenset())
    monkeypatch.setattr(pool, "_running_anywhere", lambda: 2)  # the caller and one thread elsewhere
    pool.stepped_down(fake.call)
    assert fake.seen == 1
    monkeypatch.setattr(pool, "_running_anywhere", lambda: 7)  # never below one
    pool.stepped_down(fake.call)
    assert fake.seen == 1 and fake.count == 2


def test_one_thread_or_another_changer_leaves_the_count_alone(fake, monkeypatch):
    running(monkeypatch, frozenset({"202"}))
    fake.count = 1
    pool.stepped_down(fake.call)
    assert (fake.seen, fake.sets) == (1, [])
    fake.count = 2
    with pool.THREAD_COUNT:  # a look-ahead driver (or another thread's call) holds the count
        pool.stepped_down(fake.call)
    assert (fake.seen, fake.sets) == (2, [])


def test_the_count_is_restored_when_the_call_raises(fake, monkeypatch):
    running(monkeypatch, frozenset({"202"}))

    def fails():
        raise RuntimeError("inside")

    with pytest.raises(RuntimeError, match="inside"):
        pool.stepped_down(fails)
    assert fake.count == 2 and not pool.THREAD_COUNT.locked()


def test_switched_off_it_changes_nothing(fake, monkeypatch):
    running(monkeypatch, frozenset({"202"}))
    monkeypatch.setattr(pool, "ENABLED", False)
    pool.stepped_down(fake.call, pool.POOLS)
    assert (fake.seen, fake.sets) == (2, [])
    monkeypatch.setattr(pool.NUMPY, "workers", (os.getpid(), frozenset({"202"})))
    assert not pool.only_hot(pool.NUMPY)


def test_the_switch_is_read_from_the_environment():
    import subprocess
    import sys

    code = "from nvmathpy.linalg.solvers.cpu import _pool_threads as p; print(p.ENABLED)"
    for value, expected in (("off", "False"), ("0", "False"), ("on", "True")):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             env={**os.environ, "NVMATHPY_FREE_CORES": value}).stdout.strip()
        assert out == expected, value


def test_without_openblas_the_call_runs_as_is(monkeypatch):
    monkeypatch.setattr(pool, "thread_count_functions", lambda: None)
    monkeypatch.setattr(pool.SCIPY, "functions", lambda: None)
    assert pool.stepped_down(lambda: 7, pool.POOLS) == 7


def test_runnable_elsewhere_reads_the_load_file():
    assert pool.runnable_elsewhere(0) >= 0
    assert pool.runnable_elsewhere(10_000) == 0


def test_the_real_probes_learn_real_threads_of_this_process():
    """Each pool's probe, run for real, leaves running only threads of this process other than
    the caller (the learning's premise), and SciPy's count functions are found once it is loaded."""
    import scipy.linalg  # noqa: F401  (loads SciPy's OpenBLAS)

    assert pool.SCIPY.functions() is not None or pool.thread_count_functions() is None
    for each in pool.POOLS:
        if each.functions() is None:
            continue
        each.probe()
        seen = pool.running_threads()
        assert str(threading.get_native_id()) not in seen
        assert seen <= set(os.listdir("/proc/self/task"))


@pytest.mark.skipif(not numpy_lapack.available(np.dtype(np.float64), "getrf", "potrf"),
                    reason="NumPy's OpenBLAS does not export LAPACK here")
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_stepped_down_factorizations_are_right_and_leave_the_count(dtype, monkeypatch):
    """A thread of the process spinning: getrf/potrf of order 263 step down to one thread (seen
    by the call) and still factor right; OpenBLAS's count is what it was."""
    functions = pool.thread_count_functions()
    get, put = functions
    before = get()
    put(2)
    seen = []
    monkeypatch.setattr(pool, "running_threads", lambda: frozenset({"foreign"}))
    monkeypatch.setattr(pool, "_running_anywhere", lambda: 2)
    monkeypatch.setattr(pool.NUMPY, "workers", (os.getpid(), frozenset({"its worker"})))  # "foreign" is not,
    monkeypatch.setattr(pool.SCIPY, "workers", (os.getpid(), frozenset({"scipy's worker"})))  # nor SciPy's
    real_get = get
    monkeypatch.setattr(pool, "thread_count_functions", lambda: (real_get, lambda n: (put(n), seen.append(n))))
    try:
        rng = np.random.default_rng(7)
        n = 263
        a = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if dtype.startswith("complex") else 0)
        spd = (a @ a.conj().T + n * np.eye(n)).astype(dtype)
        getrf, potrf = numpy_lapack.routines(spd.dtype, "getrf", "potrf")
        lu, piv, info = getrf(a.astype(dtype))
        assert info == 0
        l, u = np.tril(lu, -1) + np.eye(n), np.triu(lu)
        p = np.arange(n)
        for i, j in enumerate(piv):
            p[i], p[j] = p[j], p[i]
        tol = 2e-4 if dtype == "float32" else 1e-12
        assert np.linalg.norm(l @ u - a.astype(dtype)[p]) / np.linalg.norm(a) < tol
        c, info = potrf(spd, lower=1)
        assert info == 0
        assert np.linalg.norm(c @ c.conj().T - spd) / np.linalg.norm(spd) < tol
        assert seen == [1, 2, 1, 2]
        assert get() == 2
    finally:
        put(before)



@pytest.mark.skipif(not numpy_lapack.available(np.dtype(np.float64), "getrf", "potrf"),
                    reason="NumPy's OpenBLAS does not export LAPACK here")
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex128"])
def test_right_after_a_scipy_call_numpys_factorizations_run_on_scipys_openblas(dtype, monkeypatch):
    """SciPy's known worker alone spinning: NumPy's-pool getrf, potrf, getrs, potrs (more
    columns than it solves one by one) and the recursive LU run the same routines on SciPy's
    OpenBLAS (seen by the entry points called), with SciPy's wrappers' results up to rounding."""
    from scipy.linalg.lapack import get_lapack_funcs

    from nvmathpy.linalg.solvers.cpu import _recursive_lu as recursion

    if pool.SCIPY.functions() is None or numpy_lapack._scipy_symbol("dgetrf") is None:
        pytest.skip("SciPy's OpenBLAS is not found here")
    monkeypatch.setattr(pool.SCIPY, "workers", (os.getpid(), frozenset({"its worker"})))
    monkeypatch.setattr(pool, "running_threads", lambda: frozenset({"its worker"}))
    monkeypatch.setattr(pool, "running_among", lambda names: names & {"its worker"})
    monkeypatch.setattr(pool, "_running_anywhere", lambda: 2)
    called = []
    real_symbol = numpy_lapack._scipy_symbol

    def spied(name):
        found = real_symbol(name)
        return found and ((lambda *args: called.append(name) or found[0](*args)), found[1])

    monkeypatch.setattr(numpy_lapack, "_scipy_symbol", spied)
    monkeypatch.setattr(numpy_lapack, "_SCIPY_CALLS", {})
    rng = np.random.default_rng(11)
    n = 263
    a = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if dtype.startswith("complex") else 0)
    a = a.astype(dtype)
    spd = (a @ a.conj().T + n * np.eye(n)).astype(dtype)
    getrf, potrf = numpy_lapack.routines(a.dtype, "getrf", "potrf")
    ref_getrf, ref_potrf = get_lapack_funcs(("getrf", "potrf"), dtype=a.dtype)
    tol = 1e-4 if dtype == "float32" else 1e-12
    lu, piv, info = getrf(a)
    ref = ref_getrf(a)
    assert info == 0 and np.array_equal(piv, ref[1])
    assert np.linalg.norm(lu - ref[0]) / np.linalg.norm(ref[0]) < tol
    c, info = potrf(spd, lower=1)
    assert info == 0 and np.linalg.norm(c - ref_potrf(spd, lower=1)[0]) / np.linalg.norm(c) < tol
    b = rng.standard_normal((n, numpy_lapack.POTRS_BY_COLUMN + 1)).astype(dtype)
    getrs, potrs = numpy_lapack.routines(a.dtype, "getrs", "potrs")
    x, info = getrs(lu, piv, b)
    assert info == 0 and np.linalg.norm(a @ x - b) / np.linalg.norm(b) < tol * 100
    x, info = potrs(c, b, lower=1)
    assert info == 0 and np.linalg.norm(spd @ x - b) / np.linalg.norm(b) < tol * 100
    prefix = {"float32": "s", "float64": "d", "complex128": "z"}[dtype]
    assert called == [prefix + name for name in ("getrf", "potrf", "getrs", "potrs")]
    if dtype != "complex128" and recursion.recursive_available(a.dtype):
        factor, ran = recursion.recursive_getrf(a.dtype), []  # built (on NumPy's OpenBLAS) before the spy
        real_recursion = recursion._recursion
        monkeypatch.setattr(recursion, "_recursion", lambda name, library: ran.append(library) or
                            real_recursion(name, library))
        lu, piv, info = factor(a)
        assert ran == ["scipy"] and info == 0 and np.array_equal(piv, ref[1])
        assert np.linalg.norm(lu - ref[0]) / np.linalg.norm(ref[0]) < tol


@pytest.mark.parametrize("dtype", ["float64", "complex64"])
def test_right_after_a_scipy_call_the_blocked_eigh_runs_on_scipys_openblas(dtype, monkeypatch, request):
    """SciPy's known worker alone spinning: the blocked eigensolver runs on SciPy's OpenBLAS (its
    decomposer for "scipy" called), eigenpairs right; with a foreign thread, on NumPy's."""
    import scipy.linalg

    from nvmathpy.linalg.solvers.cpu import _blocked_eigh as blocked

    if not blocked.blocked_eigh_available(dtype) or not blocked._scipy_available(np.dtype(dtype).name):
        pytest.skip("the blocked eigensolver does not run on both OpenBLAS builds here")
    monkeypatch.setattr(pool.SCIPY, "workers", (os.getpid(), frozenset({"its worker"})))
    monkeypatch.setattr(pool.NUMPY, "workers", (os.getpid(), frozenset({"numpy's worker"})))
    monkeypatch.setattr(pool, "_running_anywhere", lambda: 2)
    used = []
    real = blocked._decomposer
    monkeypatch.setattr(blocked, "_decomposer", lambda name, library: (
        lambda *args: used.append(library) or real(name, library)(*args)))  # the runs, on which OpenBLAS
    rng = np.random.default_rng(5)
    n = 131
    x = rng.standard_normal((n, n)) + (1j * rng.standard_normal((n, n)) if dtype.startswith("complex") else 0)
    a = np.asfortranarray((x + x.conj().T).astype(dtype))
    tol = 1e-4 if dtype == "complex64" else 1e-12
    blocked._blocked_eigh.cache_clear()  # NumPy's decomposer, too, taken through the spy
    request.addfinalizer(blocked._blocked_eigh.cache_clear)  # and no spy left behind
    eigh = blocked.blocked_eigh(dtype)
    for threads, library in ((frozenset({"its worker"}), "scipy"), (frozenset({"foreign"}), None)):
        monkeypatch.setattr(pool, "running_threads", lambda threads=threads: threads)
        used.clear()
        w, v, info = eigh(a, True, True)
        assert info == 0 and used == [library or "numpy"]
        assert np.abs(w - scipy.linalg.eigvalsh(a)).max() < tol * np.abs(w).max()
        assert np.linalg.norm(a @ v - v * w) / np.linalg.norm(a) < tol * 10


def test_scipys_pool_is_looked_for_once_scipy_linalg_is_loaded(monkeypatch):
    """Before ``scipy.linalg`` is imported (which loads SciPy's OpenBLAS) not looked for, and
    asked again; found or not after: remembered (a SciPy on a BLAS outside its wheel has no pool
    of its own to find)."""
    import sys

    looks = []
    monkeypatch.setattr(pool, "_scipy_functions", [])
    monkeypatch.setattr(pool, "_scipy_library", [])
    monkeypatch.setattr(pool, "_loaded_openblas_files", lambda dirs: looks.append(1) or [])
    monkeypatch.delitem(sys.modules, "scipy.linalg", raising=False)
    assert pool.scipy_thread_count_functions() is None and pool.scipy_thread_count_functions() is None
    assert looks == []
    monkeypatch.setitem(sys.modules, "scipy.linalg", object())
    assert pool.scipy_thread_count_functions() is None and pool.scipy_thread_count_functions() is None
    assert len(looks) == 1


def test_a_thread_runnable_at_one_look_only_is_not_load(fake, monkeypatch):
    """The running count is read again after the look at the process's threads; a thread seen
    runnable in one read only (a moment's work) does not step a long call down, one seen in
    both does."""
    reads = iter([3, 1])
    monkeypatch.setattr(pool, "_running_anywhere", lambda: next(reads))
    running(monkeypatch, frozenset())
    pool.stepped_down(fake.call, learn=False)
    assert (fake.seen, fake.sets) == (2, [])
    reads = iter([2, 2])
    pool.stepped_down(fake.call, learn=False)
    assert (fake.seen, fake.sets) == (1, [1, 2])


@pytest.mark.skipif(not numpy_lapack.available(np.dtype(np.float64), "getrs", "potrs"),
                    reason="NumPy's OpenBLAS does not export LAPACK here")
def test_small_solves_do_not_look_at_the_pools(monkeypatch):
    """Solves with fewer than HOT_SOLVE_FROM right-hand side elements run on NumPy's pool without
    looking whether SciPy's spins (a look costs more than it could save there); larger ones look."""
    looks = []
    monkeypatch.setattr(numpy_lapack, "only_hot", lambda pool, scan=True: looks.append(scan) and False)
    n = 263
    rng = np.random.default_rng(3)
    a = rng.standard_normal((n, n)) + n * np.eye(n)
    getrf, getrs, potrf, potrs = numpy_lapack.routines(a.dtype, "getrf", "getrs", "potrf", "potrs")
    lu, piv, _ = getrf(a)
    c, _ = potrf(a @ a.T + n * np.eye(n), lower=1)
    small, large = np.ones(n), np.ones((n, -(-numpy_lapack.HOT_SOLVE_FROM // n)))
    getrs(lu, piv, small)
    potrs(c, np.ones((n, numpy_lapack.POTRS_BY_COLUMN + 1))[:, :1], lower=1)
    assert looks == []
    getrs(lu, piv, large)
    potrs(c, np.ones((n, numpy_lapack.POTRS_BY_COLUMN + 1)), lower=1)
    assert looks == [False, False]  # without the scan of every thread
