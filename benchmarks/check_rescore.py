"""Do a measured study's stored answers reproduce with this code? Each request set's requests
are rendered as a collect renders them, answered in process by the study's own llamacpp
engine through the engine actor's ``answer`` (in plan order, one call per set), and compared
with the answers stored in the study's workspace: raw text, score (missing equals missing),
expected score. Prints one line per set; the README cites it where a release says a
measured table still stands.

Usage: ``python benchmarks/check_rescore.py CONFIG WORKSPACE [--parallel | --one-at-a-time]
[--first N]`` (``--first``: only the first N requests of each set; default: all)."""

import argparse
import dataclasses
import glob
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from check_lone_tokens import planned_sets
from judgecal.engines.actor import answer
from judgecal.errors import InputError


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("config")
    ap.add_argument("workspace")
    path = ap.add_mutually_exclusive_group()
    path.add_argument("--parallel", action="store_true", help="parallel_probes = true")
    path.add_argument("--one-at-a-time", action="store_true", help="parallel_probes = false")
    ap.add_argument("--first", type=int, default=None)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as out:
        sets, engine_cfg = planned_sets(args.config, out)
    if args.parallel or args.one_at_a_time:
        engine_cfg = dataclasses.replace(engine_cfg, parallel_probes=bool(args.parallel))
    engine = engine_cfg.build()
    differ = 0
    try:
        for name, rows in sets:
            files = glob.glob(f"{args.workspace}/{name}/*.parquet")
            if not files:
                raise InputError(f"{args.workspace}/{name}", "no stored answers (give the measured study's output)")
            stored = pq.read_table(files).to_pandas().set_index("request_id")
            rows = rows.filter(pc.is_in(rows["request_id"], pa.array(list(stored.index))))
            if args.first:
                rows = rows.slice(0, args.first)
            t0 = time.perf_counter()
            got = answer(engine, rows).to_pandas().set_index("request_id")
            want = stored.loc[got.index]
            same_score = (got["score"] == want["score"]) | (got["score"].isna() & want["score"].isna())
            same_exp = (got["expected_score"] == want["expected_score"]) | \
                (got["expected_score"].isna() & want["expected_score"].isna())
            same = same_score & same_exp & (got["raw_text"] == want["raw_text"])
            gap = np.nanmax(np.abs(got["expected_score"] - want["expected_score"]).to_numpy(), initial=0.0)
            differ += int((~same).sum())
            print(f"{name}: {len(got)} of {len(stored)} stored requests re-scored ({engine.identity}, "
                  f"parallel_probes={engine_cfg.parallel}) in {time.perf_counter() - t0:.0f} s: "
                  f"{int((~same).sum())} differ; largest expected-score difference {gap:g}")
    finally:
        engine.close()
    return 1 if differ else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except InputError as e:  # one line, as the CLI prints it
        print(f"error: {e}", file=sys.stderr)
        sys.exit(e.exit_code)
