"""The plan lifecycle every operation shares, and the engine interface plans run on.

A plan is specified (constructor: wrap and validate operands, build the :class:`Problem`),
planned (:meth:`Plan.plan`: list the engine's candidates, take the wisdom winner or the
heuristic's first, prepare it), optionally tuned (:meth:`Plan.autotune`: time candidates,
record the winner in wisdom), executed many times, fed new data with ``reset_operands`` and
finally freed. Each phase either completes or leaves the plan as it was.

A candidate that cannot be prepared (say a generated kernel the machine's toolchain cannot
compile) or run is logged on the ``nvmathpy`` logger (WARNING) and skipped: ``plan()`` takes the
next one in heuristic order, ``autotune()`` times the others. Only when every candidate fails
does the phase fail, with an error that names each candidate and why it failed.

The hot path is one attribute load and one call: ``execute()`` calls ``self._run``, a closure
the subclass builds (in :meth:`Plan._bind`) over the prepared candidate and the current
operands. Before planning and after freeing, ``_run`` is a function that raises the right
:class:`PlanStateError`, so ``execute`` needs no state check of its own.
"""

from __future__ import annotations

import abc
import json
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from .._logging import logger
from ..errors import CandidatesFailedError, InvalidOptionError, PlanStateError
from .autotune import (
    CONFIRM_ROUNDS,
    CONFIRM_SAMPLE_SECONDS,
    EFFORTS,
    KEEP_MARGIN,
    MEASURE_TOP,
    Timer,
    contenders,
    perf_counter_timer,
    pick_winner,
    progress_reporter,
    time_candidates,
)
from .problem import Problem, freeze, thaw
from .wisdom import Wisdom, WisdomWarning, default_wisdom

__all__ = ["Candidate", "Engine", "Plan", "Prepared", "remembered_choice"]


@dataclass(frozen=True)
class Candidate:
    """One way an engine can compute a problem: a label and JSON-like parameters.

    Examples
    --------
    >>> c = Candidate.of("blas-gemm", order="F", threads=2)
    >>> c.params["order"], c.to_dict()["label"]
    ('F', 'blas-gemm')
    """

    label: str
    frozen_params: tuple = field(default=())

    @classmethod
    def of(cls, label: str, **params: Any) -> "Candidate":
        return cls(label, freeze(params))

    @property
    def params(self) -> dict[str, Any]:
        return {k: thaw(v) for k, v in self.frozen_params}

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "params": self.params}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Candidate":
        return cls.of(data["label"], **data.get("params", {}))

    def __str__(self) -> str:
        params = ",".join(f"{k}={thaw(v)}" for k, v in self.frozen_params)
        return f"{self.label}({params})" if params else self.label


def _failure_summary(failures: Mapping[str, BaseException]) -> str:
    """One line per failed candidate: ``candidate: ExceptionType: message`` (message shortened)."""
    lines = []
    for label, exc in failures.items():
        text = " ".join(str(exc).split())
        lines.append(f"  {label}: {type(exc).__name__}: {text[:400]}{'...' if len(text) > 400 else ''}")
    return "candidates that failed:\n" + "\n".join(lines)


def remembered_choice(entry: Mapping[str, Any] | None) -> "Candidate | None":
    """The candidate a wisdom entry names, or ``None`` when there is no entry or its choice is
    malformed (an edited or damaged file: it is ignored, as a stale one is)."""
    if entry is None:
        return None
    choice = entry.get("choice")
    if not (isinstance(choice, Mapping) and isinstance(choice.get("label"), str)
            and isinstance(choice.get("params", {}), Mapping)):
        return None
    try:
        return Candidate.from_dict(choice)
    except (TypeError, ValueError):
        return None


class Prepared:
    """A candidate made ready to run: handles, workspace, compiled kernels, library plans.

    Engines subclass this (or use it as is for stateless candidates). ``free()`` releases
    resources and may be called more than once; ``wisdom_extra()`` returns JSON-like state
    worth storing in wisdom beside the winner (e.g. FFTW's exported wisdom).
    """

    def __init__(self, candidate: Candidate, **state: Any):
        self.candidate = candidate
        self.state = state

    def free(self) -> None:
        self.state = {}

    def wisdom_extra(self) -> dict[str, Any]:
        return {}


class Engine(abc.ABC):
    """How one operation runs in one execution space.

    An engine lists candidate configurations for a problem in its heuristic order (best
    guess first), prepares a candidate, and describes its device for wisdom keys.
    """

    #: A short name, e.g. ``"cpu-blas"``.
    name: str = "engine"
    #: How autotune times a call on this engine (CUDA engines time with events).
    timer: Timer = staticmethod(perf_counter_timer)

    @abc.abstractmethod
    def candidates(self, problem: Problem) -> list[Candidate]:
        """All candidates for ``problem``, best guess first (never empty)."""

    @abc.abstractmethod
    def prepare(self, problem: Problem, candidate: Candidate, extra: Mapping[str, Any] | None = None) -> Prepared:
        """Make ``candidate`` ready; ``extra`` is what wisdom stored beside it, if anything."""

    @abc.abstractmethod
    def device(self) -> dict[str, Any]:
        """A JSON-like description of the device (keys wisdom entries)."""


def _raise_not_planned(*args: Any, **kwargs: Any) -> Any:
    raise PlanStateError("execute() called before plan(): call plan() first (or use the one-call function)")


def _raise_freed(*args: Any, **kwargs: Any) -> Any:
    raise PlanStateError("this plan has been freed; create a new one")


class Plan(abc.ABC):
    """Base class of every operation's plan.

    Subclasses set ``self._problem`` and ``self._engine`` in their constructor (after
    validating operands) and implement :meth:`_bind`, which returns the hot-path closure for a
    prepared candidate and the current operands; ``execute()`` calls it.

    Threads: a plan object is not safe to use from two threads at once (its operands,
    buffers and workspace are its own, and ``execute()`` takes no lock, to stay cheap); give
    each thread its own plan. The one-call functions are safe from any number of threads:
    their plan cache hands each concurrent caller a plan of its own.
    """

    _problem: Problem
    _engine: Engine

    def __init__(self, *, wisdom: Wisdom | None = None):
        self._wisdom = wisdom if wisdom is not None else default_wisdom()
        self._prepared: Prepared | None = None
        self._run: Callable[..., Any] = _raise_not_planned
        self._freed = False
        #: How the current candidate was chosen: "heuristic", "wisdom" or "autotune".
        self.chosen_by: str | None = None

    # -- what subclasses provide -----------------------------------------------------------

    @abc.abstractmethod
    def _bind(self, prepared: Prepared) -> Callable[..., Any]:
        """The hot-path closure running ``prepared`` on the current operands."""

    def _timing_call(self, prepared: Prepared) -> Callable[[], Any]:
        """A no-argument call autotune times; by default the bound closure itself."""
        return self._bind(prepared)

    def _closure_for(self, prepared: Prepared) -> Callable[..., Any]:
        """:meth:`_bind`'s closure as :meth:`_install`/:meth:`_rebind` keep it in ``_run``
        (a subclass whose closures use the plan itself binds them weakly here)."""
        return self._bind(prepared)

    # -- introspection ---------------------------------------------------------------------

    @property
    def problem(self) -> Problem:
        """The problem key this plan computes."""
        return self._problem

    @property
    def candidate(self) -> Candidate | None:
        """The candidate in use (``None`` before planning)."""
        return None if self._prepared is None else self._prepared.candidate

    @property
    def is_planned(self) -> bool:
        return self._prepared is not None

    # -- phases ----------------------------------------------------------------------------

    def _check_alive(self, phase: str) -> None:
        if self._freed:
            raise PlanStateError(f"{phase}() called on a freed plan; create a new one")

    def plan(self) -> "Plan":
        """Choose a candidate (wisdom's winner if known, else the heuristic's first) and
        prepare it. Calling it again re-plans. Returns the plan itself."""
        self._check_alive("plan")
        candidates = self._engine.candidates(self._problem)
        chosen, extra, how = candidates[0], None, "heuristic"
        entry = self._wisdom.lookup(self._problem, self._engine.device())
        remembered = remembered_choice(entry)
        if remembered is not None and remembered in candidates:
            chosen, extra, how = remembered, entry.get("extra"), "wisdom"
        prepared = None
        if how == "wisdom":
            try:
                prepared = self._engine.prepare(self._problem, chosen, extra)
            except Exception as exc:  # noqa: BLE001 - a damaged entry's state must not stop planning
                warnings.warn(f"nvmathpy: the wisdom entry for {chosen} could not be used ({type(exc).__name__}: "
                              f"{exc}); planning without it", WisdomWarning, stacklevel=2)
                how = "heuristic"
        if prepared is None:
            chosen, prepared = self._prepare_first_working(candidates)
        self._install(prepared, how)
        if logger.isEnabledFor(20):
            logger.info("%s: planned %s (%s) for problem %s", type(self).__name__, chosen, how, self._problem.digest())
        return self

    def _prepare_first_working(self, candidates: list[Candidate]) -> tuple[Candidate, Prepared]:
        """The first candidate (in heuristic order) that can be prepared, prepared; a failing one
        is logged and the next tried. If all fail, the first one's exception is raised (its type
        is the one a caller expects, e.g. for invalid operands), noting the others' failures."""
        failures: list[tuple[Candidate, Exception]] = []
        for candidate in candidates:
            try:
                return candidate, self._engine.prepare(self._problem, candidate, None)
            except Exception as exc:  # noqa: BLE001 - try the next candidate
                failures.append((candidate, exc))
                if len(candidates) > 1:
                    logger.warning("%s: candidate %s could not be prepared (%s: %s); trying the next",
                                   type(self).__name__, candidate, type(exc).__name__, exc)
        first = failures[0][1]
        if len(failures) > 1 and hasattr(first, "add_note"):
            first.add_note(_failure_summary({str(c): e for c, e in failures}))
        raise first

    def autotune(
        self,
        *,
        effort: str = "measure",
        repeats: int = 5,
        budget_seconds: float | None = None,
        force: bool = False,
    ) -> dict[str, float]:
        """Time candidates and keep the fastest; record it in wisdom.

        Candidates within :data:`~nvmathpy.plan.autotune.CONFIRM_WITHIN` of the fastest are
        timed a second time, with more rounds and longer samples, and decide on those
        timings. The heuristic's first choice is kept when it is within
        :data:`~nvmathpy.plan.autotune.KEEP_MARGIN` (2%) of the fastest: differences that
        small are noise on a shared machine.

        Parameters
        ----------
        effort
            ``"estimate"``: no timing, keep the heuristic/wisdom choice. ``"measure"``: time
            the heuristic's top few. ``"exhaustive"``: time every candidate.
        repeats
            Timed samples per candidate (the median counts).
        budget_seconds
            Stop preparing and timing further candidates once this much time is spent (the
            first candidate is always timed).
        force
            Time even if wisdom already knows the winner.

        Returns
        -------
        dict
            Median seconds per call for each timed candidate (empty if nothing was timed).

        Notes
        -----
        Progress shows as a tqdm bar on a terminal when tqdm is installed, else as INFO lines
        on the ``nvmathpy`` logger when INFO is enabled.
        """
        self._check_alive("autotune")
        if effort not in EFFORTS:
            raise InvalidOptionError(f"autotune: effort={effort!r} is not allowed; allowed: {list(EFFORTS)}")
        if isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1:
            raise InvalidOptionError(f"autotune: repeats must be a positive int, got {repeats!r}")
        if budget_seconds is not None and (isinstance(budget_seconds, bool) or not isinstance(
                budget_seconds, (int, float)) or budget_seconds < 0):
            raise InvalidOptionError(f"autotune: budget_seconds must be None or a number >= 0, got {budget_seconds!r}")
        if self._prepared is None:
            self.plan()
        if effort == "estimate" or (self.chosen_by == "wisdom" and not force):
            return {}
        candidates = self._engine.candidates(self._problem)
        if effort == "measure":
            candidates = candidates[:MEASURE_TOP]
        if len(candidates) < 2 and not force:
            return {}
        prepared: dict[str, Prepared] = {}
        start = time.perf_counter()
        step, close_progress = progress_reporter(f"{type(self).__name__} autotune", len(candidates) + repeats)
        failures: dict[str, Exception] = {}
        try:
            for cand in candidates:  # preparing (e.g. FFTW planning) counts against the budget too
                if prepared and budget_seconds is not None and time.perf_counter() - start > budget_seconds:
                    break
                try:
                    prepared[str(cand)] = (
                        self._prepared if cand == self._prepared.candidate
                        else self._engine.prepare(self._problem, cand)
                    )
                except Exception as exc:  # noqa: BLE001 - one failing candidate must not stop the others
                    failures[str(cand)] = exc
                    logger.warning("%s: autotune: candidate %s could not be prepared (%s: %s); skipped",
                                   type(self).__name__, cand, type(exc).__name__, exc)
                if step is not None:
                    step(f"prepared {cand}")
            remaining = None if budget_seconds is None else max(0.0, budget_seconds - (time.perf_counter() - start))
            runners = []
            for label, p in prepared.items():
                try:
                    runners.append((label, self._timing_call(p)))
                except Exception as exc:  # noqa: BLE001
                    failures[label] = exc
                    logger.warning("%s: autotune: candidate %s could not be bound (%s: %s); skipped",
                                   type(self).__name__, label, type(exc).__name__, exc)
            timings = time_candidates(
                runners,
                repeats=repeats,
                budget_seconds=remaining,
                timer=self._engine.timer,
                progress=step,
                failures=failures,
            )
            if not timings:
                raise CandidatesFailedError(
                    f"{type(self).__name__} autotune: no candidate could be prepared and run; "
                    + _failure_summary(failures), failures)
            self._confirm(timings, runners, repeats, budget_seconds, start, failures)
            if not timings:
                raise CandidatesFailedError(
                    f"{type(self).__name__} autotune: no candidate ran when timed again; "
                    + _failure_summary(failures), failures)
        except BaseException:
            for p in prepared.values():
                if p is not self._prepared:
                    p.free()
            raise
        finally:
            close_progress()
        winner_label = pick_winner(timings, str(candidates[0]))
        winner = prepared[winner_label]
        for p in prepared.values():
            if p is not winner and p is not self._prepared:
                p.free()
        if winner is not self._prepared:
            self._install(winner, "autotune")  # frees the candidate it replaces
        else:
            self.chosen_by = "autotune"
        self._wisdom.record(
            self._problem,
            self._engine.device(),
            winner.candidate.to_dict(),
            timings=timings,
            extra=winner.wisdom_extra(),
        )
        if logger.isEnabledFor(20):
            others = [t for label, t in timings.items() if label != winner_label]
            margin = min(others) / timings[winner_label] if others else 1.0
            logger.info(
                "%s: autotune chose %s (%.3g s/call, %.2fx the best other; the heuristic's first choice is kept "
                "within %.0f%% of the fastest) among %s",
                type(self).__name__, winner_label, timings[winner_label], margin, 100 * KEEP_MARGIN,
                json.dumps(timings),
            )
        return timings

    def _confirm(self, timings: dict[str, float], runners: list, repeats: int, budget_seconds: float | None,
                 start: float, failures: dict[str, Exception]) -> None:
        """Time the close contenders of ``timings`` again (more rounds, longer samples) and
        put their new medians in ``timings``, within what is left of the budget; a contender
        that fails now is dropped."""
        close = contenders(timings)
        remaining = None if budget_seconds is None else budget_seconds - (time.perf_counter() - start)
        if not close or (remaining is not None and remaining <= 0):
            return
        again = time_candidates(
            [(label, run) for label, run in runners if label in close],
            repeats=max(repeats, CONFIRM_ROUNDS),
            sample_seconds=CONFIRM_SAMPLE_SECONDS,
            budget_seconds=remaining,
            timer=self._engine.timer,
            failures=failures,
        )
        for label in close:
            if label in again:
                timings[label] = again[label]
            elif label in failures:
                del timings[label]

    def _install(self, prepared: Prepared, how: str) -> None:
        """Make ``prepared`` current: bind first (may raise), then swap and free the old one."""
        run = self._closure_for(prepared)
        old, self._prepared, self._run, self.chosen_by = self._prepared, prepared, run, how
        if old is not None and old is not prepared:
            old.free()

    def _rebind(self) -> None:
        """Rebuild the hot-path closure after operands changed (for ``reset_operands``)."""
        if self._prepared is not None:
            self._run = self._closure_for(self._prepared)

    def free(self) -> None:
        """Release everything the plan holds. Idempotent."""
        if self._freed:
            return
        self._freed = True
        self._run = _raise_freed
        prepared, self._prepared = self._prepared, None
        if prepared is not None:
            prepared.free()

    def __enter__(self) -> "Plan":
        self._check_alive("__enter__")
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.free()

    def __repr__(self) -> str:
        state = "freed" if self._freed else ("planned: " + str(self.candidate) if self._prepared else "not planned")
        return f"<{type(self).__name__} {self._problem.operation} [{state}]>"
