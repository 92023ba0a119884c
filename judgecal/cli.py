"""``judgecal`` command line: demo, run, collect, fit, evaluate, report.

Every subcommand takes one TOML config (see judgecal/configs/demo.toml). Bad input prints
one line naming the file, row or field and exits with code 2.
"""

from __future__ import annotations

import argparse
import os
import sys

from judgecal.errors import InputError

STAGES = ("run", "collect", "fit", "evaluate", "report")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="judgecal", description="Make LLM judges agree with people (PRISM).")
    sub = p.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="PRISM end to end on bundled SummEval with the embedded CPU judge")
    demo.add_argument("--output", help="output folder (default: runs/demo)")
    for name in STAGES:
        s = sub.add_parser(name, help=f"{name} stage of a study" if name != "run" else "all stages of a study")
        s.add_argument("config", help="study config (TOML)")
        s.add_argument("--output", help="override [study].output")
    return p


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local cluster for one user; see README
    try:
        return _dispatch(args)
    except InputError as e:
        print(f"judgecal: error: {e}", file=sys.stderr)
        return InputError.exit_code


def _dispatch(args) -> int:
    from judgecal import study
    from judgecal.config import demo_config_path, load_config
    from judgecal.report import format_table

    overrides = {"output": args.output} if args.output else {}
    cfg = load_config(demo_config_path() if args.command == "demo" else args.config, overrides)
    if args.command in ("demo", "run"):
        summary = study.run_all(cfg)
        print(format_table(summary))
        print(f"\nwrote {cfg.output}/ (responses/, features.parquet, predictions.parquet, results.json, report.html)")
    elif args.command == "collect":
        stats = study.run_collect(cfg)
        print(f"collected {stats['computed']} new responses ({stats['already_done']} were already committed)")
    elif args.command == "fit":
        models = study.run_fit(cfg)
        for name, m in models.items():
            print(f"{name}: gamma={m['gamma']:.3g} alpha={m['alpha']:.3f} intercept={m['intercept']:+.3f}")
    elif args.command == "evaluate":
        print(format_table(study.run_evaluate(cfg)))
    elif args.command == "report":
        print(study.run_report(cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
