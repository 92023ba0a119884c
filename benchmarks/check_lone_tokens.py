"""Which requests of the shipped demos that were measured one prompt at a time can the
previous release have answered with a token computed alone?

That path kept ``min(common prefix, len - 1)`` cached tokens and evaluated the rest in batches
of ``n_batch``, so a prompt's last token was computed alone when one new token was left (the
cache held the prompt whole, or but for its last token) or when its new tokens came to one
past a multiple of ``n_batch``; llama.cpp computes a batch of one token with other kernels.
This release never does (README, the llamacpp engine), so these are the requests whose
answers the fix can have moved; every other answer is the same on both releases and on both
paths.

No judge is run: each config's requests are planned and rendered as a collect does, and
tokenized by the config's own judge. The order a fresh collect hands them to the engine:
blocks of whole items, each in plan order, rows grouped by scale inside a block, blocks in
any order, and the engine may start on an empty cache at a block. So a prompt follows the one
before it in its item (same scale), and an item's first prompt of a scale may follow the last
prompt of any item of any scale, or nothing; a request counts when any of these makes it
compute a token alone. Not covered: a collect that retried failed rows (a retried prompt can
follow any prompt, its own repeat too). -> ``results/lone_tokens.json``.

Usage: ``python benchmarks/check_lone_tokens.py [CONFIG ...]`` (default: the diagnostics,
formats and expanded-HANNA demo configs)."""

import sys
import tempfile

import numpy as np
import pyarrow as pa

from _common import save
from judgecal.config import demo_config_path, load_study
from judgecal.errors import InputError
from judgecal.engines.llamacpp_parallel import common_prefix
from judgecal.methods.runner import StudyRunner
from judgecal.pipeline.collect import CollectStats
from judgecal.pipeline.plan_source import PlanSource
from judgecal.pipeline.render import render_table

DEMOS = ["diagnostics_demo", "formats_demo", "expanded_hanna"]


def planned_sets(config: str, out: str):
    """Every request set of the study, rendered in plan order (the collect itself is not run:
    each set is answered as empty, so a set that needs another's answers is not reached), and
    the study's engine config."""
    sets = []

    def capture(run, name, plan, renderer, engine, settings, log):
        src = PlanSource.of(plan)
        table = pa.concat_tables([src.row_group(g) for g in range(src.num_row_groups)])
        rows = table.append_column("attempt", pa.array([1] * table.num_rows, pa.int32()))
        sets.append((name, render_table(renderer, rows)))
        return CollectStats(table.num_rows, table.num_rows, 0)

    cfg = load_study(config, [f'study.output="{out}"'], runtime=True)
    runner = StudyRunner(cfg)
    runner.run.batch_io = capture
    try:
        runner.collect()
    except Exception as e:  # noqa: BLE001 - a later set that needs answers: the sets before it are checked
        print(f"{config}: stopped after {len(sets)} sets ({type(e).__name__})", file=sys.stderr)
    return sets, cfg.engine


def alone(new: int, n_batch: int) -> bool:
    """The previous release computed a token alone for ``new`` new tokens."""
    return new == 1 or (new > 1 and new % n_batch == 1)


def lone_requests(rows: pa.Table, engine) -> list[str]:
    """The request ids whose prompt some admissible order makes compute a token alone."""
    from judgecal.engines.actor import prompts_from_table

    n_batch = engine.llm.n_batch
    prompts = prompts_from_table(rows)
    toks = [np.array(engine.prompt_tokens(p)) for p in prompts]
    keys = list(zip(rows["item_id"].to_pylist(), rows["mode"].to_pylist(), rows["scale_lo"].to_pylist(),
                    rows["scale_hi"].to_pylist()))
    first, before, latest = set(), {}, {}  # an item's first prompt per scale; the one before; its last
    for i, k in enumerate(keys):
        if k in latest:
            before[i] = latest[k]
        else:
            first.add(i)
        latest[k] = i
    ends = sorted(latest.values())
    found = []
    for i, t in enumerate(toks):
        if i in first:  # after any item's last prompt of any scale, or on an empty cache
            options = [j for j in ends if j != i] + [None]
        else:
            options = [before[i]]
        for j in options:
            keep = 0 if j is None else min(common_prefix(toks[j], t), len(t) - 1)
            if alone(len(t) - keep, n_batch):
                found.append(prompts[i].request_id)
                break
    return found


def main(configs: list[str]) -> None:
    result = {"studies": {}}
    for config in configs:
        with tempfile.TemporaryDirectory() as out:
            sets, engine_cfg = planned_sets(demo_config_path(config) if config in DEMOS else config, out)
        if engine_cfg.kind != "llamacpp":
            raise InputError(f"{config} [engine].kind", f"{engine_cfg.kind!r}: this check is for the llamacpp engine")
        engine = engine_cfg.build()
        study = result["studies"][config] = {"judge": engine.identity, "n_batch": engine.llm.n_batch}
        try:
            for name, rows in sets:
                found = lone_requests(rows, engine)
                study[name] = {"requests": rows.num_rows, "could_compute_a_token_alone": len(found),
                               "request_ids": found[:20]}
                print(f"{config}/{name}: {len(found)} of {rows.num_rows:,} requests", file=sys.stderr)
        finally:
            engine.close()
    save("lone_tokens", result)


if __name__ == "__main__":
    try:
        main(sys.argv[1:] or DEMOS)
    except InputError as e:  # one line, as the CLI prints it
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
