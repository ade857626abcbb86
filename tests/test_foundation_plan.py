"""The plan lifecycle, candidates, autotune and wisdom hits, on a toy engine."""

from __future__ import annotations

import numpy as np
import pytest

import logging

from nvmathpy.errors import CandidatesFailedError, InvalidOptionError, PlanStateError
from nvmathpy.plan import Candidate, Engine, Plan, Prepared, Problem, Wisdom


class ScaleEngine(Engine):
    """Multiplies by a factor; candidate 'slow' loops longest in Python, and its timer counts
    the loops (deterministic timings)."""

    name = "toy"

    def __init__(self, fail_on: str | tuple[str, ...] | None = None):
        self.prepared: list[Prepared] = []
        self.fail_on = fail_on
        self.loops_run = 0

    def candidates(self, problem):
        return [Candidate.of("slow", loops=2000), Candidate.of("fast", loops=0), Candidate.of("medium", loops=200)]

    def prepare(self, problem, candidate, extra=None):
        if candidate.label in ((self.fail_on,) if isinstance(self.fail_on, str) else self.fail_on or ()):
            raise RuntimeError(f"cannot prepare {candidate.label}")
        prepared = Prepared(candidate, extra=dict(extra or {}))
        prepared.freed = False

        def free():
            prepared.freed = True

        prepared.free = free
        prepared.wisdom_extra = lambda: {"made_by": candidate.label}
        self.prepared.append(prepared)
        return prepared

    def device(self):
        return {"space": "toy"}

    def timer(self, fn, calls):
        """Seconds per call from the loops the candidate ran, not the clock: what autotune
        picks must not depend on the machine's load."""
        fn()
        return 1e-6 * (1 + self.loops_run)


class Scale(Plan):
    def __init__(self, x, factor, *, engine=None, wisdom=None, broken_runs=()):
        super().__init__(wisdom=wisdom)
        self.broken_runs = broken_runs  # labels of candidates whose calls raise
        self.x = np.asarray(x)
        self.factor = factor
        self._problem = Problem.of("scale", shape=list(self.x.shape), factor=factor)
        self._engine = engine or ScaleEngine()

    def _bind(self, prepared):
        x, factor, loops = self.x, self.factor, prepared.candidate.params["loops"]
        broken = prepared.candidate.label in self.broken_runs

        engine = self._engine

        def run():
            if broken:
                raise ValueError(f"{prepared.candidate.label} cannot run")
            for _ in range(loops):
                pass
            engine.loops_run = loops
            return x * factor

        return run

    def execute(self):
        return self._run()

    def reset_operands(self, x):
        self.x = np.asarray(x)
        self._rebind()


@pytest.fixture
def wisdom(tmp_path):
    return Wisdom(tmp_path / "wisdom.json", enabled=True)


def test_execute_before_plan_raises():
    plan = Scale([1.0, 2.0], 3.0)
    with pytest.raises(PlanStateError, match="before plan"):
        plan.execute()


def test_plan_execute_reset_free(wisdom):
    plan = Scale([1.0, 2.0], 3.0, wisdom=wisdom)
    assert plan.plan() is plan
    assert plan.chosen_by == "heuristic" and plan.candidate.label == "slow"
    np.testing.assert_array_equal(plan.execute(), [3.0, 6.0])
    plan.reset_operands([5.0, 7.0])
    np.testing.assert_array_equal(plan.execute(), [15.0, 21.0])
    prepared = plan._prepared
    plan.free()
    assert prepared.freed
    plan.free()  # idempotent
    with pytest.raises(PlanStateError, match="freed"):
        plan.execute()
    with pytest.raises(PlanStateError, match="freed"):
        plan.plan()
    with pytest.raises(PlanStateError, match="freed"):
        plan.autotune()


def test_context_manager_frees(wisdom):
    with Scale([1.0], 2.0, wisdom=wisdom) as plan:
        plan.plan()
        assert plan.execute()[0] == 2.0
    with pytest.raises(PlanStateError):
        plan.execute()
    with pytest.raises(PlanStateError):
        with plan:
            pass


def test_autotune_picks_fastest_and_records_wisdom(wisdom):
    engine = ScaleEngine()
    plan = Scale(np.arange(3.0), 2.0, engine=engine, wisdom=wisdom)
    timings = plan.autotune(effort="exhaustive", repeats=3)
    assert set(timings) == {"slow(loops=2000)", "fast(loops=0)", "medium(loops=200)"}
    assert plan.candidate.label == "fast" and plan.chosen_by == "autotune"
    assert all(p.freed for p in engine.prepared if p is not plan._prepared)
    entry = wisdom.lookup(plan.problem, engine.device())
    assert entry["choice"] == {"label": "fast", "params": {"loops": 0}}
    assert entry["extra"] == {"made_by": "fast"}

    # A new plan of the same problem takes the winner from wisdom, with its extra, and does not time.
    engine2 = ScaleEngine()
    again = Scale(np.arange(3.0), 2.0, engine=engine2, wisdom=wisdom).plan()
    assert again.chosen_by == "wisdom" and again.candidate.label == "fast"
    assert again._prepared.state["extra"] == {"made_by": "fast"}
    assert again.autotune() == {}
    assert len(engine2.prepared) == 1
    # force re-times
    assert len(again.autotune(force=True, effort="exhaustive", repeats=1)) == 3


def test_autotune_keeps_the_heuristic_choice_within_the_noise_margin(wisdom, monkeypatch):
    from nvmathpy.plan import base

    seconds = {"slow(loops=2000)": 1.00, "fast(loops=0)": 0.99, "medium(loops=200)": 1.5}
    monkeypatch.setattr(base, "time_candidates", lambda runners, **kw: {label: seconds[label] for label, _ in runners})
    plan = Scale(np.arange(3.0), 2.0, wisdom=wisdom)
    plan.autotune(effort="exhaustive")
    assert plan.candidate.label == "slow"  # 1% slower than the fastest: noise, the heuristic stays
    seconds["fast(loops=0)"] = 0.9
    plan = Scale(np.arange(3.0), 2.0, wisdom=wisdom)
    plan.autotune(effort="exhaustive", force=True)
    assert plan.candidate.label == "fast"  # 10% faster: a real difference


def test_autotune_estimate_does_not_time(wisdom):
    plan = Scale([1.0], 2.0, wisdom=wisdom)
    assert plan.autotune(effort="estimate") == {}
    assert plan.chosen_by == "heuristic"
    assert wisdom.entries() == []


def test_autotune_bad_arguments(wisdom):
    engine = ScaleEngine()
    plan = Scale([1.0], 2.0, engine=engine, wisdom=wisdom)
    with pytest.raises(InvalidOptionError, match="effort='fastest'.*estimate"):
        plan.autotune(effort="fastest")
    with pytest.raises(InvalidOptionError, match="repeats must be a positive int, got 0"):
        plan.autotune(repeats=0)
    with pytest.raises(InvalidOptionError, match="budget_seconds must be None or a number >= 0, got -1"):
        plan.autotune(budget_seconds=-1)
    assert engine.prepared == []  # nothing was prepared before the arguments were checked


def test_a_candidate_that_cannot_be_prepared_is_skipped_by_autotune(wisdom, caplog):
    engine = ScaleEngine(fail_on="medium")
    plan = Scale([1.0, 2.0], 4.0, engine=engine, wisdom=wisdom).plan()
    with caplog.at_level(logging.WARNING, logger="nvmathpy"):
        timings = plan.autotune(effort="exhaustive", repeats=1)
    assert set(timings) == {"slow(loops=2000)", "fast(loops=0)"}
    assert any("medium(loops=200)" in r.getMessage() and "cannot prepare medium" in r.getMessage()
               for r in caplog.records if r.levelno == logging.WARNING)
    np.testing.assert_array_equal(plan.execute(), [4.0, 8.0])
    assert plan.chosen_by == "autotune" and plan.candidate.label in ("slow", "fast")
    assert all(p.freed for p in engine.prepared if p is not plan._prepared)


def test_a_candidate_that_fails_when_run_is_skipped_by_autotune(wisdom, caplog):
    engine = ScaleEngine()
    plan = Scale([1.0, 2.0], 4.0, engine=engine, wisdom=wisdom, broken_runs=("fast",)).plan()
    with caplog.at_level(logging.WARNING, logger="nvmathpy"):
        timings = plan.autotune(effort="exhaustive", repeats=2)
    assert set(timings) == {"slow(loops=2000)", "medium(loops=200)"}
    assert any("fast(loops=0)" in r.getMessage() and "fast cannot run" in r.getMessage() for r in caplog.records)
    assert plan.candidate.label in ("slow", "medium")
    np.testing.assert_array_equal(plan.execute(), [4.0, 8.0])
    assert all(p.freed for p in engine.prepared if p is not plan._prepared)


def test_autotune_fails_only_when_every_candidate_fails_and_says_why(wisdom):
    engine = ScaleEngine()
    plan = Scale([1.0, 2.0], 4.0, engine=engine, wisdom=wisdom, broken_runs=("slow",)).plan()
    engine.fail_on = ("fast", "medium")
    with pytest.raises(CandidatesFailedError) as info:
        plan.autotune(effort="exhaustive", repeats=1)
    message = str(info.value)
    for label, why in [("slow", "slow cannot run"), ("fast", "cannot prepare fast"),
                       ("medium", "cannot prepare medium")]:
        assert label in message and why in message
    assert set(info.value.failures) == {"slow(loops=2000)", "fast(loops=0)", "medium(loops=200)"}
    assert plan.candidate.label == "slow" and plan.chosen_by == "heuristic"  # the plan is as it was
    assert all(p.freed for p in engine.prepared if p is not plan._prepared)


def test_plan_skips_a_first_candidate_that_cannot_be_prepared(wisdom, caplog):
    engine = ScaleEngine(fail_on="slow")
    with caplog.at_level(logging.WARNING, logger="nvmathpy"):
        plan = Scale([1.0], 2.0, engine=engine, wisdom=wisdom).plan()
    assert plan.candidate.label == "fast" and plan.chosen_by == "heuristic"
    assert any("cannot prepare slow" in r.getMessage() for r in caplog.records)
    assert plan.execute()[0] == 2.0


def test_failure_in_plan_leaves_plan_unplanned_but_usable(wisdom):
    engine = ScaleEngine(fail_on=("slow", "fast", "medium"))
    plan = Scale([1.0], 2.0, engine=engine, wisdom=wisdom)
    with pytest.raises(RuntimeError, match="cannot prepare slow") as info:
        plan.plan()
    if hasattr(info.value, "__notes__"):  # Python >= 3.11: the others' failures are noted
        assert "cannot prepare fast" in info.value.__notes__[0] and "cannot prepare medium" in info.value.__notes__[0]
    with pytest.raises(PlanStateError, match="before plan"):
        plan.execute()
    engine.fail_on = None
    assert plan.plan().execute()[0] == 2.0


def test_stale_wisdom_choice_falls_back_to_heuristic(wisdom):
    plan = Scale([1.0], 2.0, wisdom=wisdom)
    wisdom.record(plan.problem, {"space": "toy"}, {"label": "gone", "params": {}})
    assert plan.plan().chosen_by == "heuristic"


def test_budget_limits_preparing_and_timing(wisdom):
    engine = ScaleEngine()
    plan = Scale(np.arange(3.0), 2.0, engine=engine, wisdom=wisdom)
    timings = plan.autotune(effort="exhaustive", budget_seconds=0.0, repeats=1)
    assert list(timings) == ["slow(loops=2000)"]
    assert len(engine.prepared) == 1  # the other candidates were never prepared


def test_candidate_round_trip():
    c = Candidate.of("gemm", order="F", threads=[1, 2])
    assert Candidate.from_dict(c.to_dict()) == c
    assert hash(c) == hash(Candidate.from_dict(c.to_dict()))
    assert str(c) == "gemm(order=F,threads=[1, 2])"


def test_autotune_reports_progress_as_info_lines(wisdom, caplog):
    import logging

    plan = Scale(np.arange(3.0), 2.0, wisdom=wisdom)
    with caplog.at_level(logging.INFO, logger="nvmathpy"):
        plan.autotune(effort="exhaustive", repeats=2)
    steps = [r.getMessage() for r in caplog.records if "Scale autotune:" in r.getMessage()]
    assert steps[0].startswith("Scale autotune: 1/5 prepared slow") and steps[-1] == "Scale autotune: 5/5 round 2/2"
    assert any("autotune chose fast" in r.getMessage() for r in caplog.records)


def test_autotune_times_the_close_contenders_again_and_decides_on_that(wisdom, monkeypatch):
    """A first pass that puts a candidate within CONFIRM_WITHIN of the fastest is not the last
    word: the contenders are timed again (more rounds, longer samples) and that timing decides."""
    from nvmathpy.plan import autotune, base

    passes = []

    def timings(runners, **kw):
        labels = [label for label, _ in runners]
        passes.append((labels, kw))
        first = {"slow(loops=2000)": 3.0, "fast(loops=0)": 1.0, "medium(loops=200)": 1.1}
        second = {"fast(loops=0)": 1.0, "medium(loops=200)": 0.8}
        return {label: (first if len(passes) == 1 else second)[label] for label in labels}

    monkeypatch.setattr(base, "time_candidates", timings)
    plan = Scale(np.arange(3.0), 2.0, wisdom=wisdom)
    result = plan.autotune(effort="exhaustive", repeats=2)
    assert plan.candidate.label == "medium"  # the second timing reversed the first
    assert result == {"slow(loops=2000)": 3.0, "fast(loops=0)": 1.0, "medium(loops=200)": 0.8}
    assert len(passes) == 2
    assert sorted(passes[1][0]) == ["fast(loops=0)", "medium(loops=200)"]  # 3.0 is not close
    assert passes[1][1]["repeats"] >= autotune.CONFIRM_ROUNDS and passes[1][1]["sample_seconds"] > 1e-3


def test_autotune_does_not_time_again_without_close_contenders_or_budget(wisdom, monkeypatch):
    from nvmathpy.plan import base

    passes = []

    def timings(runners, **kw):
        passes.append([label for label, _ in runners])
        return {label: {"slow(loops=2000)": 3.0, "fast(loops=0)": 1.0, "medium(loops=200)": 2.0}[label]
                for label, _ in runners}

    monkeypatch.setattr(base, "time_candidates", timings)
    Scale(np.arange(3.0), 2.0, wisdom=wisdom).autotune(effort="exhaustive")
    assert len(passes) == 1  # nothing within 25% of the fastest
    passes.clear()
    Scale(np.arange(3.0), 2.0, wisdom=wisdom).autotune(effort="exhaustive", force=True, budget_seconds=0)
    assert len(passes) == 1  # the budget is spent: the first pass decides


def test_a_contender_that_fails_when_timed_again_is_dropped(wisdom, monkeypatch):
    from nvmathpy.plan import base

    calls = []

    def timings(runners, failures=None, **kw):
        calls.append(1)
        out = {}
        for label, _ in runners:
            if len(calls) == 2 and label == "fast(loops=0)":
                failures[label] = RuntimeError("gone")
                continue
            out[label] = {"slow(loops=2000)": 3.0, "fast(loops=0)": 1.0, "medium(loops=200)": 1.1}[label]
        return out

    monkeypatch.setattr(base, "time_candidates", timings)
    plan = Scale(np.arange(3.0), 2.0, wisdom=wisdom)
    result = plan.autotune(effort="exhaustive")
    assert plan.candidate.label == "medium" and "fast(loops=0)" not in result


def test_the_contenders_are_the_close_ones_fastest_first():
    from nvmathpy.plan.autotune import contenders

    assert contenders({"a": 1.0, "b": 1.25, "c": 1.26}) == ["a", "b"]
    assert contenders({"a": 1.0, "b": 1.1, "c": 1.2, "d": 1.0}, most=3) == ["a", "d", "b"]
    assert contenders({"a": 1.0}) == [] and contenders({}) == []
