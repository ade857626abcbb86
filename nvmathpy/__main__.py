"""The command line: ``python -m nvmathpy info | demo | bench | wisdom``."""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from typing import Sequence

__all__ = ["main"]


def _cmd_info(args: argparse.Namespace) -> int:
    from .info import collect_info, format_info

    info = collect_info()
    print(json.dumps(info, indent=1) if args.json else format_info(info))
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .demos import DEMOS

    names = args.only or list(DEMOS)
    unknown = sorted(set(names) - set(DEMOS))
    if unknown:
        print(f"unknown demo(s) {unknown}; available: {list(DEMOS)}", file=sys.stderr)
        return 2
    failures = []
    start = time.perf_counter()
    for index, name in enumerate(names, 1):
        module = importlib.import_module(f".demos.{name}", __package__)
        print(f"[{index}/{len(names)}] {module.TITLE}", flush=True)
        if not module.run(lambda text: print(f"    {text}", flush=True)):
            failures.append(name)
    elapsed = time.perf_counter() - start
    if failures:
        print(f"demo FAILED checks in: {', '.join(failures)} ({elapsed:.1f} s)")
        return 1
    print(f"demo passed all checks in {elapsed:.1f} s")
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from .bench import SUITES
    from .bench import harness

    harness.clean_openblas_env()  # OpenBLAS reads these at load time: re-exec without them
    names = list(SUITES) if "all" in args.suites else list(dict.fromkeys(args.suites))
    from .execution import cpu_description

    environment = {**cpu_description(), "blas_in_use": harness.blas_summary()}
    print(f"BLAS in use: {environment['blas_in_use']}; CPU: {environment['cpu']} ({environment['cores']} cores)")
    results = []
    for name in names:
        module = importlib.import_module(f".bench.{SUITES[name]}", __package__)
        cases = module.cases(quick=args.quick)
        results += harness.run_cases(cases, repeats=args.repeats,
                                     progress=lambda text: print(f"  timing {text}", file=sys.stderr, flush=True))
    print(harness.format_table(results))
    if args.json:
        harness.write_json(results, args.json, environment)
        print(f"wrote {args.json}")
    if args.plot:
        harness.write_plot(results, args.plot, f"nvmathpy {environment['cpu']}, {environment['blas_in_use']}")
        print(f"wrote {args.plot}")
    return 0


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
    elif args.action == "export":
        print(f"exported {wisdom.export(args.file)} entries to {args.file}")
    elif args.action == "import":
        print(f"imported {wisdom.import_(args.file)} entries from {args.file}")
    else:
        wisdom.clear()
        print(f"cleared {wisdom.path}")
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m nvmathpy", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    info = sub.add_parser("info", help="versions, BLAS, execution spaces, optional libraries, cache")
    info.add_argument("--json", action="store_true", help="print JSON")
    info.set_defaults(func=_cmd_info)
    demo = sub.add_parser("demo", help="a short tour, checked against NumPy/SciPy and timed beside them")
    demo.add_argument("only", nargs="*", help="run only these demos")
    demo.set_defaults(func=_cmd_demo)
    bench = sub.add_parser("bench", help="nvmathpy beside NumPy/SciPy and other installed peers: medians, ratios")
    bench.add_argument("suites", nargs="*", default="all", choices=["matmul", "fft", "linalg", "all"],
                       help="which suites (default: all)")
    bench.add_argument("--quick", action="store_true", help="fewer, smaller cases")
    bench.add_argument("--repeats", type=int, default=7, help="timed rounds per case (median reported)")
    bench.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    bench.add_argument("--plot", metavar="FILE.png", help="also draw speedups (needs matplotlib)")
    bench.set_defaults(func=_cmd_bench)
    wisdom = sub.add_parser("wisdom", help="manage the autotuning wisdom store")
    wisdom.add_argument("action", choices=["show", "export", "import", "clear"])
    wisdom.add_argument("file", nargs="?", help="the file for export/import")
    wisdom.set_defaults(func=_cmd_wisdom)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status."""
    parser = _parser()
    args = parser.parse_args(argv)
    if getattr(args, "action", None) in ("export", "import") and not args.file:
        parser.error(f"wisdom {args.action} needs a FILE")
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
