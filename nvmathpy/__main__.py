"""The command line: ``python -m nvmathpy info | demo | bench | wisdom | tune | run``."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import sys
import time
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Sequence

if TYPE_CHECKING:
    from .demos._space import Space

__all__ = ["main"]

#: Device seconds one GPU sample aims at (each timed call is bracketed by its own events).
CUDA_SAMPLE_SECONDS = 0.005


def _cmd_info(args: argparse.Namespace) -> int:
    from .info import collect_info, format_info

    info = collect_info()
    print(json.dumps(info, indent=1) if args.json else format_info(info))
    return 0


def _space(args: argparse.Namespace) -> Space | None:
    """The execution space ``--space`` asks for; ``None`` (after a message on stderr) when it
    cannot be used."""
    from .demos._space import select
    from .errors import ExecutionSpaceUnavailableError

    try:
        return select(args.space)
    except ExecutionSpaceUnavailableError as exc:
        print(f"{exc}. Use --space cpu (or auto) on this machine.", file=sys.stderr)
        return None


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demos import DEMOS, module_name

    names = args.only or list(DEMOS)
    unknown = sorted(set(names) - set(DEMOS))
    if unknown:
        print(f"unknown demo(s) {unknown}; available: {list(DEMOS)}", file=sys.stderr)
        return 2
    space = _space(args)
    if space is None:
        return 2
    print(_space_line(space), flush=True)
    failures = []
    start = time.perf_counter()
    for index, name in enumerate(names, 1):
        module = importlib.import_module(f".demos.{module_name(name, space.name)}", __package__)
        print(f"[{index}/{len(names)}] {module.TITLE}", flush=True)
        echo: Callable[[str], None] = lambda text: print(f"    {text}", flush=True)  # noqa: E731
        if not _guarded(f"demo {name}", lambda: module.run(echo, space) if space.is_cuda else module.run(echo)):
            failures.append(name)
    elapsed = time.perf_counter() - start
    if failures:
        print(f"demo FAILED checks in: {', '.join(failures)} ({elapsed:.1f} s)")
        return 1
    print(f"demo passed all checks in {elapsed:.1f} s")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench import CUDA_SUITES, SUITES
    from .bench import harness

    harness.clean_openblas_env()  # OpenBLAS reads these at load time: re-exec without them
    space = _space(args)
    if space is None:
        return 2
    names = list(SUITES) if "all" in args.suites else list(dict.fromkeys(args.suites))
    from .execution import cpu_description

    environment = {**cpu_description(), "blas_in_use": harness.blas_summary(), "space": space.name}
    print(f"BLAS in use: {environment['blas_in_use']}; CPU: {environment['cpu']} ({environment['cores']} cores)")
    title = f"nvmathpy {environment['cpu']}, {environment['blas_in_use']}"
    print(_space_line(space) + ("; timed with CUDA events" if space.is_cuda else ""))
    if space.is_cuda:
        environment.update(_gpu_environment(space))
        title = f"nvmathpy on {space.description} vs {space.peer}"
    progress = lambda text: print(f"  timing {text}", file=sys.stderr, flush=True)  # noqa: E731
    results: list = []
    failed = []

    def run_suite(name: str) -> bool:
        if space.is_cuda:
            module = importlib.import_module(f".bench.{CUDA_SUITES[name]}", __package__)
            results.extend(harness.run_cases(module.cases(quick=args.quick, space=space), repeats=args.repeats,
                                             min_seconds=CUDA_SAMPLE_SECONDS, progress=progress, timer=space.timer))
        else:
            module = importlib.import_module(f".bench.{SUITES[name]}", __package__)
            results.extend(harness.run_cases(module.cases(quick=args.quick), repeats=args.repeats, progress=progress))
        return True

    for name in names:
        if not _guarded(f"bench {name}", lambda: run_suite(name)):
            failed.append(name)
    print(harness.format_table(results))
    print(harness.vs_fastest(results))
    if args.json:
        harness.write_json(results, args.json, environment)
        print(f"wrote {args.json}")
    if args.plot:
        harness.write_plot(results, args.plot, title)
        print(f"wrote {args.plot}")
    if failed:
        print(f"bench: suite(s) {', '.join(failed)} failed (traceback above); the others are reported")
        return 1
    return 0


def _space_line(space: Space) -> str:
    """The first line of demo and bench: where they run, the peers, and why not CUDA (auto)."""
    return (f"execution space: {space.name} ({space.description}); peers: {space.peer}"
            + (f" [{space.note}]" if space.note else ""))


def _guarded(what: str, step: Callable[[], bool]) -> bool:
    """``step()``, or ``False`` after its traceback on stderr: one broken demo or suite (say an
    engine missing on this GPU) is reported without hiding the others."""
    try:
        return bool(step())
    except Exception:
        print(f"{what} raised:", file=sys.stderr)
        traceback.print_exc()
        return False


def _gpu_environment(space: Space) -> dict:
    """The GPU and peer versions for the JSON report."""
    from .cuda.runtime import device_description

    versions = {"cupy": getattr(space.xp, "__version__", "unknown")}
    if space.torch is not None:
        versions["torch"] = space.torch.__version__
    return {"gpu": device_description(space.xp.cuda.Device().id), **versions}


def _cmd_wisdom(args: argparse.Namespace) -> int:
    from .plan.wisdom import default_wisdom

    wisdom = default_wisdom()
    if args.action == "show":
        entries = wisdom.entries()
        print(f"{wisdom.path}: {len(entries)} entries")
        for entry in entries:
            problem = entry["problem"]
            print(f"  {problem['operation']} {json.dumps(problem['fields'], sort_keys=True)} -> "
                  f"{entry['choice']['label']} {json.dumps(entry['choice'].get('params', {}), sort_keys=True)}")
    elif args.action in ("export", "import"):
        try:
            count = wisdom.export(args.file) if args.action == "export" else wisdom.import_(args.file)
        except (OSError, ValueError) as exc:
            print(f"wisdom {args.action}: {exc}", file=sys.stderr)
            return 1
        print(f"{args.action}ed {count} entries {'to' if args.action == 'export' else 'from'} {args.file}")
    else:
        wisdom.clear()
        print(f"cleared {wisdom.path}")
    return 0


def _cmd_run(args: argparse.Namespace) -> int:
    """Run a script (or ``-m`` a module) as ``__main__`` with its arguments, patched from its first line."""
    import os
    import runpy

    from .patching import patch

    try:
        patch(*(name.strip() for name in args.patch.split(",") if name.strip()))
    except ValueError as exc:
        print(f"run --patch: {exc}", file=sys.stderr)
        return 2
    sys.argv = [args.target, *args.args]
    if args.module:
        runpy.run_module(args.target, run_name="__main__", alter_sys=True)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(args.target)))
        runpy.run_path(args.target, run_name="__main__")
    return 0


def _cmd_tune(args: argparse.Namespace) -> int:
    from .execution import cpu_description
    from .fft._calibrate import CALIBRATIONS as FFT_CALIBRATIONS
    from .linalg.solvers.cpu._calibrate import CALIBRATIONS as SOLVER_CALIBRATIONS
    from .linalg.solvers.cpu._routine_threads import CALIBRATIONS as THREAD_CALIBRATIONS
    from .plan.calibration import OutOfTime, record

    CALIBRATIONS = {**SOLVER_CALIBRATIONS, **FFT_CALIBRATIONS, **THREAD_CALIBRATIONS}

    # measured in this process's environment (OPENBLAS_CORETYPE included), which the key names
    asked = args.only or [""]
    names = [n for n in CALIBRATIONS if any(n == a or n.startswith(a + ".") or not a for a in asked)]
    unknown = [a for a in asked if a and not any(n == a or n.startswith(a + ".") for n in CALIBRATIONS)]
    if unknown:
        kinds = sorted({n.rsplit(".", 1)[0] for n in CALIBRATIONS})
        print(f"tune: unknown crossover(s) {unknown}; available: {kinds}, each by order or size (e.g. getrf.float64.1024)",
              file=sys.stderr)
        return 2
    here = cpu_description()
    print(f"calibrating {len(names)} crossover(s) on {here['cpu']} ({here['cores']} cores, {here['blas']}), "
          f"at most about {args.seconds:g} s", flush=True)
    deadline = time.perf_counter() + args.seconds
    for left, name in zip(range(len(names), 0, -1), names):
        start = time.perf_counter()
        try:
            value, measured = CALIBRATIONS[name](max(0.0, deadline - start) / left)
        except OutOfTime as exc:
            print(f"  {name}: not measured ({exc}; the default stands)", flush=True)
            continue
        record(name, value, measured, time.perf_counter() - start)
        planned = f", plans {value['planned']} at FFTW_MEASURE on {value.get('threads')} thread(s)" if "planned" in value else ""
        print(f"  {name}: first {value['first']}{planned}  (speed-up over SciPy's call: {json.dumps(measured)}; "
              f"{time.perf_counter() - start:.1f} s)", flush=True)
    return 0


def _add_space_option(parser: argparse.ArgumentParser) -> None:
    from .demos._space import CHOICES

    parser.add_argument("--space", choices=CHOICES, default="auto",
                        help="where to run: cpu, cuda (CuPy arrays; CuPy/torch as the peers), or auto "
                             "(cuda when a GPU and CuPy are usable, else cpu; the default)")


def _positive(text: str) -> int:
    """An argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nvmathpy", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="versions, BLAS, execution spaces, optional libraries, cache")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(func=_cmd_info)
    demo = sub.add_parser("demo", help="a short tour, checked against NumPy/SciPy and timed beside them")
    demo.add_argument("only", nargs="*", help="run only these demos")
    _add_space_option(demo)
    demo.set_defaults(func=_cmd_demo)
    bench = sub.add_parser("bench", help="nvmathpy beside NumPy/SciPy and other installed peers: medians, ratios")
    bench.add_argument("suites", nargs="*", default="all", choices=["matmul", "fft", "linalg", "all"],
                       help="which suites (default: all)")
    bench.add_argument("--quick", action="store_true", help="fewer, smaller cases")
    bench.add_argument("--repeats", type=_positive, default=7, help="timed rounds per case (median reported)")
    bench.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    bench.add_argument("--plot", metavar="FILE.png", help="also draw speedups (needs matplotlib)")
    _add_space_option(bench)
    bench.set_defaults(func=_cmd_bench)
    wisdom = sub.add_parser("wisdom", help="manage the autotuning wisdom store")
    wisdom.add_argument("action", choices=["show", "export", "import", "clear"])
    wisdom.add_argument("file", nargs="?", help="the file for export/import")
    wisdom.set_defaults(func=_cmd_wisdom)
    run = sub.add_parser("run", help="run a script (or -m a module) with NumPy/SciPy patched to nvmathpy")
    run.add_argument("--patch", default="", metavar="NS[,NS...]",
                     help="the namespaces to patch (default: all): scipy.linalg, numpy.linalg, numpy.fft, scipy.fft")
    run.add_argument("-m", dest="module", action="store_true", help="TARGET is a module name, run as python -m does")
    run.add_argument("target", metavar="TARGET", help="the script (or module) to run")
    run.add_argument("args", nargs=argparse.REMAINDER, help="its arguments (its sys.argv[1:])")
    run.set_defaults(func=_cmd_run)
    tune = sub.add_parser("tune", help="measure the CPU heuristics' crossovers on this machine, kept in wisdom")
    tune.add_argument("only", nargs="*", help="only these crossovers (e.g. getrf, getrf.float64, "
                                              "getrf.float64.1024, threads.gesdd or fft.c2c.double; "
                                              "default: all)")
    tune.add_argument("--seconds", type=_positive, default=300, help="time bound for all of them (default 300)")
    tune.set_defaults(func=_cmd_tune)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, "action", None) in ("export", "import") and not args.file:
        parser.error(f"wisdom {args.action} needs a FILE")
    for option in ("json", "plot"):  # checked before the benchmark runs, not after
        target = getattr(args, option, None) if args.command == "bench" else None
        if target and not Path(target).resolve().parent.is_dir():
            parser.error(f"--{option} {target}: the directory {Path(target).resolve().parent} does not exist")
    if args.command == "bench" and getattr(args, "plot", None) and importlib.util.find_spec("matplotlib") is None:
        parser.error(f"--plot {args.plot} needs matplotlib, which is not installed: pip install 'nvmathpy[bench]' "
                     "(or run without --plot)")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
