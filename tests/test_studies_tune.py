"""The subset grid as Ray Tune trials: bitwise the local numbers, a rerun that redoes only
what is missing, and results (and Tune's own state) on s3:// (moto's server on 127.0.0.1)."""

import os
import time

import boto3
import numpy as np
import pytest

from s3_endpoint import BUCKET, SECRET, aws_env, start_moto
from judgecal.calibrate.prism import DEFAULT_GAMMAS
from judgecal.studies.subsets import chunks, enumerate_subsets, prepare, run_local
from judgecal.studies.tune import run_grid, run_tune


@pytest.fixture(scope="module")
def s3_env():
    """moto on 127.0.0.1 and the AWS variables in this process's environment *before* Ray
    starts, so that Ray's workers (which inherit the raylet's environment) reach it too."""
    server, port = start_moto()
    env = aws_env(port)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id="testing",
                 aws_secret_access_key=SECRET, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    yield port
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v
    server.stop()


@pytest.fixture(scope="module")
def ray_s3(s3_env, ray_local):  # in this order: the environment first, then Ray
    return s3_env


@pytest.fixture(scope="module")
def problem():
    """6 units (2 columns each, as the paired representation), 40 groups of 6 rows."""
    rng = np.random.default_rng(3)
    n_units, groups, per = 6, 40, 6
    n = groups * per
    D = rng.normal(0, 0.3, size=(n, 2 * n_units))
    s0 = rng.normal(3, 1, n)
    y = s0 - D @ rng.normal(0, 1, 2 * n_units) + rng.normal(0, 0.5, n)
    g = np.repeat(np.arange(groups), per)
    m = prepare(s0, D, y, g, [[2 * u, 2 * u + 1] for u in range(n_units)], DEFAULT_GAMMAS, n_splits=5, inner_cv=4)
    work = chunks(enumerate_subsets(n_units), size=4)  # 18 chunks
    return m, work, run_local(m, work)


def assert_same(got, want):
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert list(a) == list(b)
        for k in b:
            assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k], equal_nan=True), k


def ray_results() -> set:
    home = os.path.expanduser("~/ray_results")
    return set(os.listdir(home)) if os.path.isdir(home) else set()


def test_tune_equals_local_bitwise(ray_s3, problem, tmp_path):
    m, work, local = problem
    seen, before = [], ray_results()
    got = run_tune(m, work, str(tmp_path), "grid", progress=lambda d, t: seen.append((d, t)))
    assert_same(got, local)
    files = sorted(os.listdir(tmp_path / "grid" / "results"))
    assert files == ["manifest.json"] + sorted(f"trial-{i}.npz" for i in range(6))  # 3 chunks per trial by default
    assert seen[-1] == (len(work), len(work))
    assert ray_results() == before  # Tune wrote nothing to ~/ray_results
    assert_same(run_grid(m, work, "local", str(tmp_path), "unused"), local)


def test_rerun_redoes_only_the_missing_trial(ray_s3, problem, tmp_path):
    m, work, local = problem
    assert_same(run_tune(m, work, str(tmp_path), "resume", chunks_per_trial=4), local)
    res = tmp_path / "resume" / "results"
    names = [f"trial-{i}.npz" for i in range(5)]  # 18 chunks, 4 per trial
    before = {n: os.stat(res / n).st_mtime_ns for n in names}
    (res / "trial-2.npz").unlink()
    time.sleep(0.05)
    t0, said = time.time_ns(), []
    assert_same(run_tune(m, work, str(tmp_path), "resume", chunks_per_trial=4,
                         reused=lambda found, trials: said.append((found, trials))), local)
    assert said == [(4, 5)]  # the rerun says what it found (it started at "14/18 chunks solved", unsaid)
    after = {n: os.stat(res / n).st_mtime_ns for n in names}
    assert after["trial-2.npz"] >= t0
    assert all(after[n] == before[n] for n in names if n != "trial-2.npz")
    # everything present: no Tune run at all, the files are read back
    t1 = time.perf_counter()
    assert_same(run_tune(m, work, str(tmp_path), "resume"), local)  # the manifest's 4 per trial
    assert time.perf_counter() - t1 < 5
    with pytest.raises(ValueError, match="chunks per trial"):
        run_tune(m, work, str(tmp_path), "resume", chunks_per_trial=3)
    with pytest.raises(ValueError, match="another grid"):
        run_tune(m, work[:-1], str(tmp_path), "resume")


def test_results_and_tune_state_on_s3(ray_s3, problem):
    m, work, local = problem
    got = run_tune(m, work, f"s3://{BUCKET}/tune", "grid", chunks_per_trial=6)
    assert_same(got, local)
    c = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{ray_s3}", aws_access_key_id="testing",
                     aws_secret_access_key=SECRET, region_name="us-east-1")
    keys = [o["Key"] for p in c.get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix="tune/grid/")
            for o in p.get("Contents", [])]
    assert {f"tune/grid/results/trial-{i}.npz" for i in range(3)} <= set(keys)
    assert "tune/grid/results/manifest.json" in keys
    assert any(k.startswith("tune/grid/experiment_state-") for k in keys)  # Tune's own state went to s3 too
    assert "tune/grid/tuner.pkl" in keys
    c.delete_object(Bucket=BUCKET, Key="tune/grid/results/trial-1.npz")
    assert_same(run_tune(m, work, f"s3://{BUCKET}/tune", "grid"), local)
