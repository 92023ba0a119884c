"""``judgecal`` command line: demo, run, collect, fit, evaluate, report, audit-templates.

Every stage subcommand takes one TOML study file; ``[study] method`` picks the method from
the registry (``judgecal.methods``), and ``--set section.field=value`` overrides any field
(``--set engine.kind=simulated --set study.output=s3://bucket/x``). ``fit`` is PRISM's fit or
URW's calibration. Bad input prints one line naming the file, row or field and exits 2;
a collection that ends with failed requests prints one summary line and exits 3.
"""

from __future__ import annotations

import argparse
import os
import sys

from judgecal.errors import InputError

STAGES = ("run", "collect", "fit", "evaluate", "report")
DEMOS = {"prism": "demo", "urw": "urw_demo"}


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="judgecal", description="Make LLM judges agree with people (PRISM, URW).")
    sub = p.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="a bundled study end to end with the embedded CPU judge")
    demo.add_argument("which", nargs="?", default="prism", choices=tuple(DEMOS),
                      help="prism: SummEval probes (default); urw: InfoBench calibration, LLMBar pairs")
    audit = sub.add_parser("audit-templates", help="sample / apply the verifier template audit")
    audit.add_argument("action", choices=("sample", "apply"))
    audit.add_argument("sheet", help="the CSV sheet a person marks (written by sample, read by apply)")
    audit.add_argument("--result", default="template_audit.json", help="apply: where the audit result goes")
    for name in STAGES:
        s = sub.add_parser(name, help=f"{name} stage of a study" if name != "run" else "all stages of a study")
        s.add_argument("config", help="study config (TOML)")
    for s in [demo, *(sub.choices[n] for n in STAGES)]:
        s.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                       help="override a config field (repeatable); the value is read as TOML, bare words as text")
        s.add_argument("--output", help="shorthand for --set study.output=...")
    return p


def main(argv: list[str] | None = None) -> int:
    from judgecal.pipeline.collect import CollectFailed

    args = _parser().parse_args(argv)
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local cluster for one user; see README
    try:
        return _dispatch(args)
    except InputError as e:
        print(f"judgecal: error: {e}", file=sys.stderr)
        return InputError.exit_code
    except CollectFailed as e:
        print(f"judgecal: collect: {e}", file=sys.stderr)
        return CollectFailed.exit_code


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
    from judgecal.config import demo_config_path, load_config
    from judgecal.methods.runner import StudyRunner

    if args.command == "audit-templates":
        return _audit(args)
    sets = list(args.sets) + ([f"study.output={_toml_str(args.output)}"] if args.output else [])
    path = demo_config_path(DEMOS[args.which]) if args.command == "demo" else args.config
    runner = StudyRunner(load_config(path, sets))
    method, ws = runner.method, runner.ws
    if args.command in ("demo", "run"):
        print(method.format_text(runner.run_all()))
        print(f"\nwrote {ws.uri}/ ({method.results_name}, {method.report_name}, responses/, ...)")
    elif args.command == "collect":
        stats = runner.collect()
        for name, s in stats.items():
            print(f"{name}: collected {s['computed']} new responses ({s['already_done']} were already committed)")
    elif args.command == "fit":
        fitted = runner.fit()
        for name, m in fitted.items():
            print(f"{name}: {m}")
    elif args.command == "evaluate":
        print(method.format_text(runner.evaluate()))
    elif args.command == "report":
        print(runner.report())
    return 0


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


if __name__ == "__main__":
    sys.exit(main())
