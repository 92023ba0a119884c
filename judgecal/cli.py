"""``judgecal`` command line: demo, run, collect, fit, evaluate, report, audit-templates.

Every stage subcommand takes one TOML config (judgecal/configs/demo.toml for PRISM,
urw_demo.toml for URW; ``[study] method`` picks which). ``fit`` is PRISM's fit or URW's
calibration. Bad input prints one line naming the file, row or field and exits with code 2.
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
    demo = sub.add_parser("demo", help="a bundled study end to end with the embedded CPU judge")
    demo.add_argument("which", nargs="?", default="prism", choices=("prism", "urw"),
                      help="prism: SummEval probes (default); urw: InfoBench calibration, LLMBar pairs")
    demo.add_argument("--output", help="output folder (default: runs/demo or runs/urw_demo)")
    audit = sub.add_parser("audit-templates", help="sample / apply the verifier template audit")
    audit.add_argument("action", choices=("sample", "apply"))
    audit.add_argument("sheet", help="the CSV sheet a person marks (written by sample, read by apply)")
    audit.add_argument("--result", default="template_audit.json", help="apply: where the audit result goes")
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


def _audit(args) -> int:
    from pathlib import Path

    from judgecal.rubrics import apply_audit, audit_sheet, load_infobench

    if args.action == "sample":
        audit_sheet(load_infobench()["criterion"].to_pylist(), Path(args.sheet))
        print(f"wrote {args.sheet}: mark meaning_changed = 1 where a template changes the criterion's meaning")
    else:
        kept = apply_audit(Path(args.sheet), Path(args.result))
        print(f"kept templates {list(kept.active)}; wrote {args.result} (set [urw] templates_audit to use it)")
    return 0


def _dispatch(args) -> int:
    from judgecal import study, urw_study
    from judgecal.config import demo_config_path, load_config
    from judgecal.report import format_table
    from judgecal.report.urw import format_urw_table

    if args.command == "audit-templates":
        return _audit(args)
    overrides = {"output": args.output} if args.output else {}
    path = demo_config_path("demo" if args.which == "prism" else "urw_demo") if args.command == "demo" else args.config
    cfg = load_config(path, overrides)
    if cfg.method == "urw":
        return _dispatch_urw(args.command, cfg, urw_study, format_urw_table)
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


def _dispatch_urw(command, cfg, urw_study, format_urw_table) -> int:
    if command in ("demo", "run"):
        print(format_urw_table(urw_study.run_all(cfg)))
        print(f"\nwrote {cfg.output}/ (responses/, calibration.json, urw_results.json, urw_report.html)")
    elif command == "collect":
        stats = urw_study.run_collect(cfg)
        print(f"collected {stats['computed']} new verdicts ({stats['already_done']} were already committed)")
    elif command == "fit":
        cal = urw_study.run_calibrate(cfg)
        print(f"calibrated URW on {cal['n_cal']} criteria; wrote {cfg.output}/calibration.json")
    elif command == "evaluate":
        print(format_urw_table(urw_study.run_evaluate(cfg)))
    elif command == "report":
        print(urw_study.run_report(cfg))
    return 0


if __name__ == "__main__":
    sys.exit(main())
