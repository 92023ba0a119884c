"""``judgecal`` command line: demo, run, collect, fit, evaluate, report, show, export-batch,
import-batch, audit-templates.

A study starts from one TOML file (``judgecal run study.toml``); every later command also
takes the study's folder or URI instead (``judgecal report runs/demo``, ``judgecal evaluate
s3://bucket/x``) and reads the config it ran with from ``study.json``. ``[study] method``
picks the method from the registry (``judgecal.methods``), and ``--set section.field=value``
overrides any field (``--set engine.kind=simulated --set study.output=s3://bucket/x``).
``fit`` is PRISM's fit or URW's calibration; ``show`` prints the resolved config and the
plan's size without starting Ray.

Exit codes: 2 bad input (one line naming the file, row or field); 3 a collect that stopped
with requests failing, a judge that does not answer, or (``openai-batch`` without ``--wait``)
batches still at the provider (committed parts are kept: rerun to resume), and an
``import-batch`` that leaves requests unanswered; 1 Ray did not start; 130 / 143 stopped by Ctrl-C / SIGTERM (committed parts kept).
"""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import sys
from contextlib import nullcontext

from judgecal import __version__
from judgecal.errors import InputError

STAGES = ("run", "collect", "fit", "evaluate", "report")
DEMOS = ("prism", "urw")  # methods with a demo: each names its config (``Method.demo``)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="judgecal", description="Make LLM judges agree with people (PRISM, URW).")
    p.add_argument("--version", action="version", version=f"judgecal {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="a bundled study end to end with the embedded CPU judge")
    demo.add_argument("which", nargs="?", default="prism", choices=DEMOS,
                      help="prism: SummEval probes (default); urw: InfoBench calibration, LLMBar pairs")
    audit = sub.add_parser("audit-templates", help="sample / apply the verifier template audit")
    audit.add_argument("action", choices=("sample", "apply"))
    audit.add_argument("sheet", help="the CSV sheet a person marks (written by sample, read by apply)")
    audit.add_argument("--result", default="template_audit.json", help="apply: where the audit result goes")
    helps = {"run": "all stages of a study", "show": "the resolved config, the plan's size, what is committed "
             "and the estimated cost, without starting Ray"}
    for name in (*STAGES, "show"):
        s = sub.add_parser(name, help=helps.get(name, f"{name} stage of a study"))
        s.add_argument("config", metavar="CONFIG|FOLDER",
                       help="a study config (TOML), or the folder / URI of a study that has run (its study.json)")
    for name in ("run", "collect"):
        sub.choices[name].add_argument("--wait", action="store_true", help="[engine] kind = \"openai-batch\": wait "
                                       "for the batches at the provider and commit their answers (else stop once "
                                       "they are submitted; a later collect commits them)")
    export = sub.add_parser("export-batch", help="write the pending requests as batch JSONL, for a provider "
                            "judgecal does not call")
    export.add_argument("config", metavar="CONFIG|FOLDER", help="a study config (TOML), or a study's folder / URI")
    export.add_argument("path", help="the JSONL to write (cut into PATH-001.jsonl, ... past [engine]'s limits)")
    import_ = sub.add_parser("import-batch", help="commit a batch results JSONL (output and error lines)")
    import_.add_argument("config", metavar="CONFIG|FOLDER", help="a study config (TOML), or a study's folder / URI")
    import_.add_argument("results", nargs="+", metavar="RESULTS.jsonl", help="results files from the provider")
    grid_ = sub.add_parser("grid", help="a study grid: studies x variants that never re-collect")
    grid_.add_argument("grid", metavar="GRID.toml", help="[grid] studies = [...] and [grid.vary] \"section.field\" = [...]")
    compare = sub.add_parser("compare", help="several studies' correction profiles side by side")
    compare.add_argument("logs", nargs="+", metavar="LOG|FOLDER", help="results.json files or study folders / URIs")
    for s in [demo, *(sub.choices[n] for n in (*STAGES, "show", "export-batch", "import-batch"))]:
        s.add_argument("--set", dest="sets", action="append", default=[], metavar="SECTION.FIELD=VALUE",
                       help="override a config field (repeatable); the value is read as TOML, bare words as text")
        s.add_argument("--output", help="shorthand for --set study.output=...")
    return p


def _located(e, args) -> str:
    """A refusal that names a config field alone (``[dataset].target``: found where the items
    load, away from the file) names the ``--set`` flag that gave it, else the config or study
    folder the command was given."""
    from judgecal.config import blame_set

    given = getattr(args, "config", None)
    if given and e.where.startswith("["):
        return str(blame_set(e, getattr(args, "sets", None)) or f"{given} {e}")
    return str(e)


def main(argv: list[str] | None = None, owns_process: bool | None = None) -> int:
    """``owns_process`` (default: ``argv is None``, the program itself; the jobs/ scripts say
    so too): judgecal may end the process where Ray cannot be stopped cleanly (a stalled
    start, a cluster gone mid-collect); a caller running it in-process keeps its process."""
    from judgecal.engines.base import JudgeUnavailable
    from judgecal.pipeline.collect import CollectFailed, RayStartFailed
    from judgecal.signals import exit_code, handle_stop_signals, stop_signal

    args = _parser().parse_args(argv)
    owns_process = argv is None if owns_process is None else owns_process
    import importlib

    # the module, not the function judgecal.pipeline exports under the same name
    importlib.import_module("judgecal.pipeline.collect").OWNS_PROCESS = owns_process
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local cluster for one user; see README
    import judgecal.workspace

    judgecal.workspace.CHECK_ENDPOINT = True  # a custom S3 endpoint that is down: one line at once
    handle_stop_signals()
    state: dict = {}
    ray_before = _ray_running()  # a caller's own Ray (tests) is left running
    try:
        return _dispatch(args, state)
    except InputError as e:
        _say(f"judgecal: error: {_located(e, args)}")
        return InputError.exit_code
    except JudgeUnavailable as e:
        _say(f"judgecal: judge unavailable: {e}")
        return JudgeUnavailable.exit_code
    except CollectFailed as e:
        _say(f"judgecal: collect: {e}")
        return CollectFailed.exit_code
    except RayStartFailed as e:
        _say(f"judgecal: ray: {e}")
        _mute_stderr()  # Ray's stalled start goes on trying (and logging) until the process ends
        if owns_process:  # the program itself: Ray's start is still running on its thread, inside
            _exit_now(RayStartFailed.exit_code)  # Ray's C++, which must not be torn down under it
        return RayStartFailed.exit_code
    except KeyboardInterrupt as e:  # Ctrl-C, or SIGTERM through judgecal.signals
        kept = _kept(state.get("runner"), args)  # Ray stopped first: nothing commits after the counts
        if (cost := getattr(e, "collect_cost", None)) is not None:
            _stop_ray()  # a grid's studies hold no runner here: _kept did not stop it
            _say(cost())
        _say(f"judgecal: stopped ({signal.Signals(stop_signal(e)).name}): {kept}")
        return exit_code(e)
    finally:
        # Every end of a command that started Ray (an answer, an error, a stop) stops it here,
        # on the main thread, once judgecal's own threads are done: left to the interpreter's
        # exit, Ray's core worker is torn down while its threads may still run (an abort:
        # "terminate called without an active exception", exit 134).
        if not ray_before:
            _stop_ray()


def _say(line: str) -> None:
    """An error line on stderr, with every secret taken out (a server or a storage error may quote one)."""
    from judgecal.redact import redact

    print(redact(line), file=sys.stderr, flush=True)


def _kept(runner, args) -> str:
    """What an interrupted command leaves: the committed requests, and how to go on."""
    if runner is None:
        return "nothing was started"
    _stop_ray()
    from judgecal.config import STUDY_FILE

    if not runner.ws.exists(STUDY_FILE):
        return "nothing was written yet; rerun the same command"
    try:
        counts = runner.committed()
    except Exception as e:  # noqa: BLE001 - the message must still come out in one line
        return f"could not count the committed requests ({type(e).__name__}); rerun to resume"
    held = ", ".join(f"{n:,} in {name}/" for name, n in counts.items()) or "none yet"
    from judgecal.config import RAY_JOB_COPY

    if RAY_JOB_COPY in os.getcwd():  # a Ray job (`ray job stop`): the user resubmits, not reruns
        return f"committed responses kept: {held}; resubmit the same job to resume"
    if args.command in ("fit", "evaluate", "report"):  # they read the answers: nothing to resume ("resume" misled)
        return (f"rerun `judgecal {args.command} {shlex.quote(runner.ws.uri)}` (with the same --set, if any), which "
                "starts over "
                f"but for the finished trials of a grid solved on Ray Tune (the committed responses are kept: {held})")
    # quoted: a folder with a space, pasted, was two arguments (a user's finding)
    return (f"committed responses kept: {held}; resume with `judgecal {args.command if args.command in STAGES else 'run'} "
            f"{shlex.quote(runner.ws.uri)}`")


def _ray_running() -> bool:
    if "ray" not in sys.modules:
        return False
    import ray

    return ray.is_initialized()


def _exit_now(code: int) -> None:
    """End the process at once, after flushing what it printed: no interpreter teardown."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


def _mute_stderr() -> None:
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), 2)
    except OSError:
        pass


RAY_LEFT_S = 2.0  # a stopped Ray's processes end within moments; what is left of it after this is killed


def _stop_ray() -> None:
    """Stop the local Ray workers first, so no block commits after the count is taken."""
    if "ray" in sys.modules:
        import ray

        from judgecal.pipeline.quiet import silenced

        if ray.is_initialized():
            try:
                with silenced():  # the stopped workers' own lines add nothing to ours
                    ray.shutdown()
            except BaseException:  # noqa: BLE001 - a second Ctrl-C during shutdown
                pass
    from judgecal.signals import kill_tagged_ray

    kill_tagged_ray(RAY_LEFT_S)


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


def _dispatch(args, state: dict) -> int:
    from judgecal.config import demo_config_path, load_config, load_study, names_a_config_file
    from judgecal.errors import keeping_unread
    from judgecal.methods.base import get_method

    if args.command == "audit-templates":
        return _audit(args)
    if args.command == "grid":
        from judgecal.studies.grid import run_grid_file, summary_lines

        print("\n".join(summary_lines(run_grid_file(args.grid, log=lambda m: print(m, file=sys.stderr, flush=True)))))
        return 0
    if args.command == "compare":
        from judgecal.studies.compare import compare_profiles

        print(compare_profiles(args.logs))
        return 0
    sets = list(args.sets) + ([f"study.output={_toml_str(args.output)}"] if args.output else [])
    runs_judge = args.command in ("demo", "run", "collect")  # later stages and show never call it
    # on a folder, a setting its saved config holds that this command's --set leaves unread (subsets
    # turned off, subsets_per_size saved) is kept with a warning, as where the folder loads: it was
    # refused with "remove it", which no --set can (a user's finding); one block for the load and
    # the stage, so the warning is said once (each stage reads the design again: it came 3 times)
    folder = args.command != "demo" and not names_a_config_file(args.config)
    with keeping_unread("kept: the study folder's saved config", sets) if folder else nullcontext():
        cfg = load_config(demo_config_path(get_method(args.which).demo), sets) if args.command == "demo" else \
            load_study(args.config, sets, runtime=runs_judge,
                       reads_data=args.command in ("run", "collect", "show", "export-batch", "import-batch"))
        return _stage(args, cfg, state, folder)


def _stage(args, cfg, state: dict, folder: bool) -> int:
    from judgecal.methods.runner import StudyRunner

    if args.command == "show":
        from judgecal.methods.show import describe

        shown = StudyRunner(cfg)
        shown.check_collectable()  # what collect would refuse, show refuses (a user's finding)
        print(describe(cfg, shown.method, shown.data_changed(), shown.taken_anew))
        return 0
    runner = state["runner"] = StudyRunner(cfg)
    method, ws = runner.method, runner.ws
    if args.command in ("fit", "evaluate", "report"):
        check_sets_read(args.command, args.sets, cfg, runner.collected_config(), method.fit_ignores)
    if args.command in ("export-batch", "import-batch"):
        from judgecal.pipeline.batch_io import Exporter, Importer

        line, complete = runner.batch_by_hand(Exporter(args.path) if args.command == "export-batch"
                                              else Importer(args.results, ws))
        print(line)
        if args.command == "import-batch" and not complete:  # as collect: a study left incomplete is exit 3
            from judgecal.pipeline.collect import CollectFailed

            return CollectFailed.exit_code
    elif args.command in ("demo", "run"):
        print(method.format_text(runner.run_all(getattr(args, "wait", False))))
        print(f"\nwrote {ws.uri}/ ({method.results_name}, {method.report_name}, responses/, ...)")
    elif args.command == "collect":
        stats = runner.collect(args.wait)
        for name, s in stats.items():
            print(f"{name}: collected {s['computed']} new responses ({s['already_done']} were already committed)")
    elif args.command == "fit":
        from judgecal.report.sections import simulated_mark

        fitted = runner.fit()
        sim = simulated_mark({"simulated_judge": cfg.engine.kind == "simulated", "method": method.name})
        for name, m in fitted.items():  # a line each, not the model's dict (a user's finding)
            print(f"{name}: {_fitted_line(m)}{sim}")
        if line := _fitted_apart(runner, cfg):
            print(line)
    elif args.command == "evaluate":
        log_ = runner.evaluate()
        print(method.format_text(log_))
        if line := _models_apart(runner, cfg, args.config):
            _say(line)
        if ws.exists(method.report_name) and not runner.report_shows(log_):  # drawn from other results
            _say(f"judgecal: note: {method.report_name} still shows the previous results; `judgecal report "
                 f"{ws.uri}` draws this one")
    elif args.command == "report":
        log_, path = runner.report()
        print(method.format_text(log_))  # the text report too, as evaluate printed it (a user's finding)
        print(f"\nwrote {path}")
        _report_config_note(args.config, runner, folder)  # after the report's own checks: a refused one
        # gets their line alone
    return 0


def _ignored(key: str, ignores: tuple[str, ...]) -> bool:
    return any(key == i or i.endswith(".") and key.startswith(i) for i in ignores)


def check_sets_read(command: str, sets: list[str], cfg, collected: dict | None, ignores: tuple[str, ...]) -> None:
    """A ``--set`` the command never reads, to a value other than the collected config's, is
    refused: it would run as if it were not given and say nothing (a user's finding: ``report
    --set design.attributes=...`` redrew the old log). One repeating the collected value (a
    TOML run with ``--set`` needs it again to match its plan) changes nothing and passes."""
    from judgecal.config import value_at
    from judgecal.errors import set_key

    now = cfg.to_dict()
    for item in sets:
        key = set_key(item)
        if key == "study.output" or collected is not None and value_at(now, key) == value_at(collected, key):
            continue
        if command == "report":
            raise InputError(f"--set {key}", "report draws the results log as evaluate wrote it and reads no "
                             "setting; run `judgecal evaluate FOLDER --set ...`, then report")
        if command == "fit" and key == "diagnostics.run":  # "give it to evaluate", which refused it (a reader's finding)
            raise InputError(f"--set {key}", "fit never reads it, and the diagnostics a study runs are part of what "
                             "its collect asked: give it to `judgecal collect` (or `run`) with the study's TOML and a "
                             "new output folder")
        if command == "fit" and _ignored(key, ignores):
            raise InputError(f"--set {key}", "fit never reads it (fit fits every item on the design; folds, "
                             "resamples, grids and diagnostics are evaluate's): give it to `judgecal evaluate`")
        if command in ("fit", "evaluate") and key in COLLECT_ONLY:  # accepted without a word (a user's finding)
            raise InputError(f"--set {key}", f"{command} never reads it (it sizes the collect's work): give it to "
                             "`judgecal collect`")


# the [collect] settings only a collect reads (max_attempts is read at every stage: which failed
# requests are given up)
COLLECT_ONLY = ("collect.block_rows", "collect.part_rows", "collect.part_seconds", "collect.num_actors",
                "collect.fail_fast_requests")


def _report_config_note(path: str, runner, folder: bool) -> None:
    """`report study.toml` with settings the results log was not evaluated with drew the log and
    said nothing (a user's finding: confirmation changed in the TOML): a note says so, as fit's.
    So does `report FOLDER` where a later collect recorded other settings in study.json (a
    collect with another [fit] left the log of the earlier ones, a user's finding)."""
    from judgecal.methods.runner import settings_changed
    from judgecal.report.table import changed_text

    method, ws = runner.method, runner.ws
    log = ws.read_json(method.results_name)
    spec = (log.get("spec") or {}) if isinstance(log, dict) else {}
    changed = settings_changed(spec.get("config"), runner.cfg.to_dict())
    if folder:  # an `evaluate --set` of the user's own is no change of the folder's (a reader's finding)
        for key, was in (spec.get("not_as_collected") or {}).items():
            if key in changed and isinstance(was, list) and len(was) == 2 and was[0] == changed[key][1]:
                del changed[key]
    if changed:
        given = "recorded in study.json" if folder else "given"
        _say(f"judgecal: note: {path}: " + changed_text(changed, given, f"{method.results_name}'s evaluate run",
                                                       "evaluated")
             + f"; the report draws that run (`judgecal evaluate {path}`, then report, for these settings)")


def _fit_reads_changed(method, ref: dict | None, cfg) -> dict:
    """The settings fit reads whose values differ between the config ``ref`` and ``cfg``:
    {key: [ref's, cfg's]}."""
    from judgecal.methods.runner import settings_changed

    return {k: v for k, v in settings_changed(ref, cfg.to_dict()).items() if not _ignored(k, method.fit_ignores)}


def _fitted_apart(runner, cfg) -> str:
    """What makes the models fit just wrote other than the ones the results log describes: the
    settings fit reads that differ from the log's (or, with no log yet, the collect's)."""
    from judgecal.report.table import changed_text

    method, ws = runner.method, runner.ws
    log = ws.read_json(method.results_name) if ws.exists(method.results_name) else None
    changed = _fit_reads_changed(method, (log or {}).get("spec", {}).get("config") or runner.collected_config(), cfg)
    if not changed:
        return ""
    if log is None:
        return changed_text(changed, "fitted")
    return (changed_text(changed, "fitted", f"{method.results_name}'s evaluate run", "evaluated")
            + f"; {method.results_name} and the report describe that run, not these models (evaluate with the "
            "same --set for their numbers)")


def _models_apart(runner, cfg, given: str) -> str:
    """A note where what fit wrote (PRISM's models.json, URW's calibration.json) was fitted with
    settings other than this evaluate's (the ones fit reads), or "" (also where fit recorded no
    settings, and where its file cannot be read: the evaluate it follows has succeeded)."""
    from judgecal.report.table import changed_text

    method = runner.method
    name, fitted = method.fitted_settings(runner.ws)
    changed = _fit_reads_changed(method, fitted, cfg)
    if not changed:
        return ""
    from judgecal.config import toml_value

    fitted_then = {k: [now, then] for k, (then, now) in changed.items()}  # its values first, this evaluate's after
    # the --set fit reads, spelt out: "with the same --set" sent evaluate-only ones, which fit refuses
    sets = "".join(f" --set {shlex.quote(f'{k}={toml_value(now)}')}" for k, (_, now) in changed.items())
    return (f"judgecal: note: {name} was {changed_text(fitted_then, 'fitted', 'this evaluate', 'evaluated')}; "
            f"`judgecal fit {shlex.quote(given)}{sets}` fits it for these")


def _fitted_line(m) -> str:
    """One fitted model (PRISM's penalty and coefficients) or value, in one line."""
    if isinstance(m, dict) and "coef" in m:
        return (f"gamma {m['gamma']:.3g}, alpha {m['alpha']:.3g}, intercept {m['intercept']:+.3g}, "
                f"{len(m['coef'])} coefficients (models.json)")
    return str(m)


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


if __name__ == "__main__":
    sys.exit(main())
