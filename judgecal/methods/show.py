"""``judgecal show CONFIG|FOLDER``: a study as it would run, without running it.

The resolved config (defaults and ``--set`` overrides applied, as TOML), each request set's
size (requests, prompt tokens estimated at about four characters a token, completion tokens
at most), what the workspace already holds of the written plan, the judge time the rest takes
at the committed answers' own pace, and the estimated cost where the engine has prices. Reads datasets and the workspace only: no Ray, no engine, no request.
"""

from __future__ import annotations

import pyarrow.compute as pc

from judgecal.config import STUDY_FILE, StudyConfig, config_to_toml_dict, read_study, toml_value
from judgecal.methods.base import Method, simulated_truth
from judgecal.pipeline.answered import completeness
from judgecal.pipeline.batch_io import collected_by_hand
from judgecal.pipeline.plan_source import PlanSource
from judgecal.pipeline.progress import duration
from judgecal.pipeline.store import PartStore
from judgecal.schemas import PARSE_ERROR
from judgecal.workspace import Workspace


def describe(cfg: StudyConfig, method: Method, data_changed: str | None = None, taken_anew: bool = False) -> str:
    """``data_changed``: what changed in the data files since the study's last collect;
    ``taken_anew``: the folder holds another study of which nothing was committed (collect
    starts this one there anew: its plans are not this study's)."""
    ws = Workspace(cfg.output)
    started = ws.exists(STUDY_FILE)
    state = ("another study, of which nothing was committed: collect starts this one anew there" if taken_anew
             else "a study that has run" if started else "nothing there yet")
    lines = [f"# judgecal show: {cfg.name} ({method.name}), output {ws.uri} ({state})"]
    # a study answered by hand: its requests are exported, not asked, and export-batch re-reads the data
    by_hand = started and not taken_anew and collected_by_hand(ws)
    rereads = f"`judgecal export-batch {ws.uri} PATH`" if by_hand else "`judgecal collect`"
    if data_changed:  # committed answers stand, but the labels and texts are not the collected ones; said
        # under the first line, not after the config (a user read the counts and missed it there)
        lines.append(f"# the data changed since the last collect ({data_changed}): {rereads} re-reads it; "
                     "fit, evaluate and report refuse until then")
    lines += ["", to_toml(cfg), ""]
    resized = started and not taken_anew and _plan_changed(read_study(ws).get("plan"), method.plan_spec(cfg))
    lines.append("# requests (estimated before anything runs)")
    total_cost, priced = 0.0, False
    for e in method.estimate(cfg):
        cost = cfg.engine.cost(e.prompt_tokens, e.completion_tokens)
        total_cost += cost
        priced |= cost > 0
        lines.append(f"{e.name}: {e.requests:,} requests ({e.note}); prompt tokens ~{e.prompt_tokens:,}, "
                     f"completion tokens <= {e.completion_tokens:,}" + (f"; cost <= ${cost:,.2f}" if cost else ""))
        if ws.exists(e.plan_file) and not taken_anew:
            done = completeness(PlanSource(ws=ws, name=e.plan_file), PartStore(ws.child(e.store)),
                                cfg.collect.max_attempts)
            lines.append(f"  committed: {done.answered:,} of the written plan's {done.planned:,} answered, "
                         f"{done.failed:,} failed, {done.missing:,} not yet "
                         + ("imported (export-batch writes them, import-batch commits the provider's answers)"
                            if by_hand else "asked"))
            if resized:  # read as this config's plan (a user's finding: a resized study)
                reuse = "reuses the answers both hold" + (
                    " (the SIMULATED judge's only where the sample's items and labels are the same: its answers are "
                    "built from them)" if cfg.engine.kind == "simulated" else "")
                lines.append(f"  (the written plan is the last collect's; this config plans {e.requests:,}: the "
                             f"next collect writes it and {reuse})")
            elif data_changed:  # "0 not yet asked" read as nothing to do (a user's finding: all was asked anew)
                truth = simulated_truth(method)
                reuse = "asks anew the requests of new items and of items whose texts changed" + (
                    f", and all of them where {truth.split(' (')[0]} changed (the SIMULATED judge's answers are built "
                    f"from them{_aside(truth)})" if cfg.engine.kind == "simulated" and e.name not in
                    getattr(method, "truthless_sets", ()) else " (new labels alone ask nothing)")
                lines.append(f"  (the written plan is of the data as it was; the next collect plans it anew and "
                             f"{reuse})")
            lines += _time_left(PartStore(ws.child(e.store)), done)
        else:
            lines.append("  committed: none (plan not written yet)" if not taken_anew else
                         "  committed: none (the folder's plan is the other study's)")
        lines += _at_provider(ws.child(e.store))
    fields = [f for f in ("batch_price_per_million_prompt_tokens", "batch_price_per_million_completion_tokens")
              if hasattr(cfg.engine, f)] or ["price_per_million_prompt_tokens", "price_per_million_completion_tokens"]
    lines.append(f"cost: <= ${total_cost:,.2f} at the [engine] prices" if priced else
                 f"cost: no prices set for {cfg.engine.identity} (0 for local engines; a hosted judge's [engine] "
                 f"takes {fields[0]} and {fields[1]})")
    return "\n".join(lines)


def _aside(text: str) -> str:
    """"; <the parenthesis>" of ``text``, or ""."""
    return "; " + text.split(" (", 1)[1].rstrip(")") if " (" in text else ""


def _plan_changed(saved, now) -> bool:
    """Whether this config's plan is another than the one the folder's collect wrote (a
    request count cannot say: URW's is an estimate), as the stages' plan check reads it."""
    import json

    if not isinstance(saved, dict):
        return False
    from judgecal.methods.runner import plan_without_data

    old, new = (plan_without_data(json.loads(json.dumps(dict(p), default=str))) for p in (saved, now))
    return old != new


def _time_left(store: PartStore, done) -> list[str]:
    """The judge time the rest of the plan takes at the committed answers' own pace (a user's
    question before a long resume; measured here, not assumed: nothing before the first answers)."""
    left = done.missing + done.failed - done.exhausted  # a collect asks these (failures retried)
    if not left or not done.answered:
        return []
    t = store.read(["latency_s", "parse_status"])
    ok = pc.not_equal(t["parse_status"], PARSE_ERROR)
    per = pc.mean(pc.filter(t["latency_s"], ok)).as_py()
    if not per:
        return []
    return [f"  time left: ~{duration(per * left)} of judge time for the {left:,} requests a collect asks, at the "
            f"committed answers' {per:.3g} s each (one request at a time: replicas and requests in flight divide the "
            "wall time; collect prints an ETA as it runs)"]


def _at_provider(ws: Workspace) -> list[str]:
    """A batch engine's batches not yet committed, as the last collect saw them (no request)."""
    from judgecal.pipeline.batches import STATE, BatchState

    if not ws.exists(STATE):
        return []
    open_ = BatchState(ws).open()
    if not open_:
        return []
    statuses = ", ".join(sorted({str(b.get("status")) for b in open_}))
    return [f"  at the provider: {sum(b['requests'] for b in open_):,} requests in {len(open_)} batch"
            f"{'es' if len(open_) > 1 else ''} ({statuses} at the last collect); `judgecal collect` commits them"]


def to_toml(cfg: StudyConfig) -> str:
    """The config as a TOML file would write it (fields left unset shown as comments)."""
    out, full = [], cfg.to_dict()
    for section, values in config_to_toml_dict(full).items():
        out.append(f"[{section}]")
        out += [f"{key} = {toml_value(value)}" for key, value in values.items()]
        unset = full.get(section) if section != "study" else None
        out += [f"# {key}: not set" for key, value in (unset or {}).items() if value is None]
        out.append("")
    return "\n".join(out).rstrip()
