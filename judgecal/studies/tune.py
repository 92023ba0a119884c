"""Study grids as Ray Tune trials: chunks of work solved by the same function as in this
process, so the numbers are bitwise identical. Two grids use it: PRISM's subset x fold x
penalty grid (:func:`judgecal.studies.subsets.solve_chunk`) and URW's calibrations over
template subsets (:func:`judgecal.studies.template_sweep.solve_sweep`). A grid is
``shared`` data (put in the object store once), ``work`` (a list of ``(key, payload)``
chunks) and ``solve(shared, payload) -> dict of arrays``.

Why Tune: a grid over 2^16 subsets runs long on a cluster; Tune gives each trial one CPU and
puts the moments in the object store once (``tune.with_parameters``). Why a file per trial:
Tune's state says which trials *ended*, not that their numbers are safe. ``<storage_path>/
<name>/results/trial-<i>.npz``, written whole through :class:`judgecal.workspace.Workspace` (a
local folder or ``s3://``), is the truth: a rerun (after a killed driver, or a file gone) runs
the trials that have no file as a new Tuner in the same folder, and the others not at all.
Tune's own experiment state is never restored (``Tuner.restore``): it is pickled, and nothing
is unpickled from a study's folder or storage; the trial files are ``np.load``-ed with
``allow_pickle=False``. ``results/manifest.json`` pins the chunks per trial and a digest of
the work and moments, so a rerun never mixes in another grid's files.
"""

from __future__ import annotations

import hashlib
import io
import math
import os
import threading
from dataclasses import fields, is_dataclass

import numpy as np
import pyarrow.fs as pafs

from judgecal.errors import InputError, unread_setting
from judgecal.studies.subsets import run_local, solve_chunk
from judgecal.workspace import Workspace, _s3_options

RAY_ABOVE_CHUNKS = 64  # mode "auto": Tune only for grids of more chunks than this (and a Ray to run on)
TRIALS_PER_CPU = 4  # default packing: about this many trials per CPU of the cluster
_TUNE_ENV = {"TUNE_DISABLE_AUTO_CALLBACK_LOGGERS": "1",  # per trial only result.json (JsonLoggerCallback below)
             "TUNE_DISABLE_SIGINT_HANDLER": "1",  # Ctrl-C raises KeyboardInterrupt, as everywhere in judgecal
             "RAY_AIR_NEW_OUTPUT": "0"}  # the new reporter prints a box to stdout per fit even at verbose=0


def _trial(config, moments=None, work=None, per_trial=1, results="", solve=solve_chunk):
    """One Tune trial: its chunks of ``work`` (:func:`trial_chunks`), solved, into trial-<i>.npz."""
    from ray import tune

    i = config["trial"]
    ws, name = Workspace(results), f"trial-{i}.npz"
    chunk_ids = trial_chunks(i, len(work), per_trial)
    if not ws.exists(name):
        arrays = {f"c{j}.{k}": v for j in chunk_ids for k, v in solve(moments, work[j][1]).items()}
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        ws.write_bytes(name, buf.getvalue())
    tune.report({"chunks": len(chunk_ids)})


def trial_chunks(i: int, n_chunks: int, per_trial: int) -> range:
    """Trial i's chunks: every n_trials-th from i. Chunks grow costlier with subset size, so
    interleaving gives every trial a like mix and the last round of trials is not one long
    trial on one CPU (contiguous ranges measured 0.81 efficiency on 2 CPUs)."""
    return range(i, n_chunks, math.ceil(n_chunks / per_trial))


def _trial_dirname(trial) -> str:  # Tune's folder of trial i: trial-<i>
    return f"trial-{trial.config['trial']}"


def grid_digest(obj, h=None) -> str:
    """A content digest of the work and the moments (arrays by their bytes)."""
    top, h = h is None, h or hashlib.sha256()
    if isinstance(obj, np.ndarray):
        h.update(f"{obj.dtype}{obj.shape}".encode() + np.ascontiguousarray(obj).tobytes())
    elif is_dataclass(obj):
        for f in fields(obj):
            grid_digest(getattr(obj, f.name), h)
    elif isinstance(obj, (list, tuple)) and obj and (isinstance(obj[0], (np.ndarray, list, tuple))
                                                     or is_dataclass(obj[0])):
        h.update(f"[{len(obj)}".encode())
        for x in obj:
            grid_digest(x, h)
    else:
        h.update(repr(obj).encode())
    return h.hexdigest() if top else ""


def _poll(ws: Workspace, per_trial: int, n_chunks: int, progress, stop: threading.Event) -> None:
    said = None
    while not stop.wait(2.0):
        done = min(n_chunks, len(ws.list("", ".npz")) * per_trial)
        if done != said:  # "[subsets] 0/86 chunks solved" came 5 times in a row (a user's finding)
            progress(done, n_chunks)
            said = done


def run_tune(m, work: list, storage_path: str, name: str, chunks_per_trial: int | None = None,
             progress=None, solve=solve_chunk, reused=None) -> list[dict]:
    """Solve ``work`` as Tune trials (1 CPU each); per chunk the dict ``solve`` returns, in order.
    ``reused(found, trials)`` is told, before any trial runs, how many trials' results an
    earlier run left (a rerun started at "55/86 chunks solved" and never said why)."""
    import ray
    from ray import tune
    from ray.tune.logger import JsonLoggerCallback

    from judgecal.pipeline.collect import init_ray

    if not work:
        return []
    for k, v in _TUNE_ENV.items():
        os.environ.setdefault(k, v)
    init_ray()  # nothing if the caller started Ray
    store = Workspace(storage_path)
    results = store.child(f"{name}/results")
    # the solver is part of the grid (the subset grid's digest predates the parameter: kept)
    digest = grid_digest([work, m] if solve is solve_chunk else [work, m, f"{solve.__module__}.{solve.__qualname__}"])
    manifest = results.read_json("manifest.json") if results.exists("manifest.json") else None
    if manifest is not None and manifest.get("layout") != "interleaved":
        raise InputError(results.join("manifest.json"), "written by an earlier judgecal (another chunk layout); "
                         "delete that folder to recompute it")
    if manifest is not None and manifest["digest"] != digest:
        raise InputError(results.join("manifest.json"), "holds another grid's results; pick another name")
    per_trial = chunks_per_trial or (manifest or {}).get("per_trial") or max(
        1, math.ceil(len(work) / (TRIALS_PER_CPU * int(ray.cluster_resources().get("CPU", 1)))))
    if manifest is not None and manifest["per_trial"] != per_trial:
        raise InputError(results.join("manifest.json"), f"written with {manifest['per_trial']} chunks per trial, "
                         f"not {per_trial}; pick another name")
    n_trials = math.ceil(len(work) / per_trial)
    if manifest is None:
        results.write_json("manifest.json", {"layout": "interleaved", "digest": digest, "per_trial": per_trial,
                                             "chunks": len(work),
                                             "trials": n_trials})
    trainable = tune.with_resources(tune.with_parameters(_trial, moments=m, work=work, per_trial=per_trial,
                                                         results=results.uri, solve=solve), {"cpu": 1})
    # Tune's own state goes to the same storage (never ~/ray_results), on s3 through the
    # workspace's endpoint/region settings; allow_delayed_open: a small file is one PutObject,
    # not a multipart upload (fewer requests; and moto 5.2.1 answers CompleteMultipartUpload
    # with a root tag pyarrow rejects, getmoto/moto#10055).
    fs = pafs.S3FileSystem(**_s3_options(), allow_delayed_open=True) if store.is_s3 else None
    root = store.uri.removeprefix("s3://")

    def missing() -> list[int]:
        have = set(results.list("", ".npz"))
        return [i for i in range(n_trials) if f"trial-{i}.npz" not in have]

    def new_tuner(trials: list[int]):
        return tune.Tuner(trainable, param_space={"trial": tune.grid_search(trials)},
                          tune_config=tune.TuneConfig(trial_dirname_creator=_trial_dirname, reuse_actors=True),
                          run_config=tune.RunConfig(storage_path=root, storage_filesystem=fs, name=name, verbose=0,
                                                    failure_config=tune.FailureConfig(max_failures=2),
                                                    callbacks=[JsonLoggerCallback()]))

    stop = threading.Event()
    if progress is not None:
        threading.Thread(target=_poll, args=(results, per_trial, len(work), progress, stop), daemon=True).start()
    try:
        todo = missing()  # never Tuner.restore: its state is pickled (module docstring)
        if reused is not None and len(todo) < n_trials:
            reused(n_trials - len(todo), n_trials)
        if todo:
            grid = new_tuner(todo).fit()
            if grid.errors:
                raise grid.errors[0]
    finally:
        stop.set()
    if missing():
        raise RuntimeError(f"{results.uri}: trials {missing()[:10]} left no results")
    out: list = [None] * len(work)
    for i in range(n_trials):
        with np.load(io.BytesIO(results.read_bytes(f"trial-{i}.npz")), allow_pickle=False) as z:
            for j in trial_chunks(i, len(work), per_trial):
                keys = [k for k in z.files if k.startswith(f"c{j}.")]
                out[j] = {k.split(".", 1)[1]: z[k] for k in keys}
    if progress is not None:
        progress(len(work), len(work))
    return out


TUNE_MODES = ("auto", "local", "ray")


def check_tune(tune_cfg, where: str, no_grid: str | None = None) -> None:
    """The ``[tune]`` section, checked when the config loads. ``no_grid``: why the study has no
    grid for Tune to run; then ``mode = "ray"`` or a storage is read by nothing and refused (the
    study would run in process and say nothing, as ``[design]``'s unread settings); "local"
    and "auto" are what happens anyway."""
    if tune_cfg.mode not in TUNE_MODES:
        raise InputError(f"{where} [tune].mode", f"unknown mode {tune_cfg.mode!r} (known: {', '.join(TUNE_MODES)})")
    if tune_cfg.mode == "local" and tune_cfg.storage is not None:
        unread = [("storage", "mode = \"local\" solves grids in this process",
                   "remove it, or set mode = \"ray\" or \"auto\"")]
    else:
        unread = [(name, no_grid, "remove it, or turn that part on") for name, given in (
            ("mode", tune_cfg.mode == "ray"), ("storage", tune_cfg.storage is not None)) if no_grid and given]
    for name, why, fix in unread:  # each: a saved folder keeps one, this command's --set of another is refused
        unread_setting(f"{where} [tune].{name}", f"set to {getattr(tune_cfg, name)!r}, but {why}: nothing reads it; "
                       f"{fix}")


def run_grid(m, work: list, mode: str, storage_path: str, name: str, progress=None,
             solve=solve_chunk, reused=None) -> list[dict]:
    """``local``: in this process; ``ray``: Tune trials; ``auto``: Tune for more than
    :data:`RAY_ABOVE_CHUNKS` chunks when Ray is up (or ``RAY_ADDRESS`` names a cluster)."""
    if mode not in TUNE_MODES:
        raise InputError("mode", f"unknown mode {mode!r} (use local, ray or auto)")
    if mode == "auto":
        import ray

        mode = "ray" if len(work) > RAY_ABOVE_CHUNKS and (ray.is_initialized() or os.environ.get("RAY_ADDRESS")) \
            else "local"
    if mode == "local":
        return run_local(m, work, progress, solve)
    return run_tune(m, work, storage_path, name, progress=progress, solve=solve, reused=reused)


def grid_runner(tune_cfg, ws, label: str, log):
    """How a study's grid chunks are solved under its ``[tune]`` section: None (``local``: the
    caller solves them in process) or ``runner(shared, work, solve)``. One Tune experiment per
    grid (its data and work digested into the name), so a rerun of the same grid resumes it."""
    if tune_cfg.mode == "local":
        return None
    storage = tune_cfg.storage or ws.join("tune")

    def progress(done, total):
        log(f"[{label}] {done}/{total} chunks solved")

    def reused(found, trials):
        log(f"[{label}] {found} of {trials} Tune trials' results reused from an earlier run ({storage})")

    return lambda m, work, solve=solve_chunk: run_grid(
        m, work, tune_cfg.mode, storage, f"{label}-{grid_digest((m, work))[:12]}", progress=progress, solve=solve,
        reused=reused)
