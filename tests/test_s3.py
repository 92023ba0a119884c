"""Whole PRISM and URW studies (simulated judge) on s3:// against a real S3 endpoint on
127.0.0.1 (moto's server), through the CLI: resume, no secret in any artefact, and an upload
cut part-way that leaves nothing partial visible and a rerun that completes."""

import os
import re
import subprocess
import time

import boto3
import pyarrow as pa
import pytest

from s3_endpoint import BUCKET, SECRET, CuttingProxy, aws_env, start_moto
from conftest import ROOT, judgecal_cmd, write_config


@pytest.fixture(scope="module")
def s3():
    server, port = start_moto()
    env = aws_env(port)
    boto3.client("s3", endpoint_url=env["AWS_ENDPOINT_URL"], aws_access_key_id="testing",
                 aws_secret_access_key=SECRET, region_name="us-east-1").create_bucket(Bucket=BUCKET)
    yield port
    server.stop()


def client(port):
    return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id="testing",
                        aws_secret_access_key=SECRET, region_name="us-east-1")


def keys(port, prefix):
    pages = client(port).get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return sorted(o["Key"] for p in pages for o in p.get("Contents", []))


def judgecal(port, *args, timeout=300):
    env = {**os.environ, **aws_env(port), "RAY_AUTH_MODE": "disabled"}
    return subprocess.run(judgecal_cmd(*args), cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


PRISM = """
[study]
name = "s3-prism"
output = "runs/never-used"
[dataset]
max_groups = 6
[engine]
kind = "simulated"
[collect]
block_rows = 68
[fit]
bootstrap = 200
inner_folds = 3   # 6 groups in 5 outer folds leave 4 training groups
"""


def test_prism_study_on_s3_with_resume(s3, tmp_path):
    cfg = write_config(tmp_path / "c.toml", PRISM)
    uri = f"s3://{BUCKET}/prism"
    r = judgecal(s3, "run", str(cfg), "--set", f"study.output={uri}")
    assert r.returncode == 0, r.stderr[-3000:]
    assert "PRISM" in r.stdout and "SIMULATED" in r.stdout
    got = keys(s3, "prism/")
    for name in ("study.json", "items.parquet", "requests.parquet", "features.parquet", "models.json",
                 "predictions.parquet", "results.json", "report.html"):
        assert f"prism/{name}" in got
    assert any(k.startswith("prism/responses/part-") for k in got)
    assert not (ROOT / "s3:").exists() and not (tmp_path / "s3:").exists()
    # nothing written carries a credential or the endpoint's secret
    s3c = client(s3)
    for k in got:
        body = s3c.get_object(Bucket=BUCKET, Key=k)["Body"].read()
        assert SECRET.encode() not in body and b"AWS_SECRET" not in body
    assert SECRET not in r.stderr + r.stdout
    again = judgecal(s3, "collect", str(cfg), "--set", f"study.output={uri}")
    assert again.returncode == 0 and "0 to compute" in again.stderr
    ev = judgecal(s3, "evaluate", str(cfg), "--set", f"study.output={uri}")
    assert ev.returncode == 0 and ev.stdout.splitlines()[0] == r.stdout.splitlines()[0]


URW = """
[study]
name = "s3-urw"
output = "runs/never-used"
method = "urw"
[urw]
calibration_max_responses = 20
max_pairs_per_dataset = 3
bootstrap = 200
[engine]
kind = "simulated"
"""


def test_urw_study_on_s3_and_its_reward_reads_the_calibration_there(s3, tmp_path):
    cfg = write_config(tmp_path / "u.toml", URW)
    uri = f"s3://{BUCKET}/urw"
    r = judgecal(s3, "run", str(cfg), "--set", f"study.output={uri}")
    assert r.returncode == 0, r.stderr[-3000:]
    got = keys(s3, "urw/")
    for name in ("calibration.json", "urw_results.json", "urw_report.html", "verify.parquet",
                 "criteria_plan.parquet"):
        assert f"urw/{name}" in got
    assert any(k.startswith("urw/criteria/part-") for k in got)
    code = ("from judgecal.rewards import URWReward;"
            f"print(URWReward('{uri}/calibration.json')(['Say hi.'], ['hi there'], criteria=[['Does it greet?']]))")
    env = {**os.environ, **aws_env(s3)}
    out = subprocess.run([os.sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert 0.0 <= float(out.stdout.strip()[1:-1]) <= 1.0


def test_a_cut_upload_leaves_nothing_partial_and_the_rerun_completes(s3, tmp_path):
    proxy = CuttingProxy(s3)
    try:
        cfg = write_config(tmp_path / "c.toml", PRISM)
        uri = f"s3://{BUCKET}/cut"
        proxy.cut = True
        r = judgecal(proxy.port, "collect", str(cfg), "--set", f"study.output={uri}")
        assert r.returncode != 0 and proxy.cuts > 0
        assert "Traceback" not in r.stderr.splitlines()[-1]
        assert not [k for k in keys(s3, "cut/responses/")]  # no part, whole or partial, is visible
        proxy.cut = False
        r = judgecal(proxy.port, "collect", str(cfg), "--set", f"study.output={uri}")
        assert r.returncode == 0, r.stderr[-3000:]
    finally:
        proxy.close()
    from judgecal.pipeline import PartStore, answered
    from judgecal.workspace import Workspace

    os.environ.update(aws_env(s3))
    ws = Workspace(uri)
    plan = ws.read_parquet("requests.parquet")
    store = PartStore(ws.child("responses"))
    ans = answered(plan, store)
    assert ans.num_rows == plan.num_rows
    raw = store.read_all()["request_id"].to_pylist()
    assert len(raw) == len(set(raw)) == plan.num_rows
    assert isinstance(ans, pa.Table)


def test_exclusive_create_on_s3_and_storage_errors_in_one_line(s3, monkeypatch):
    from judgecal.errors import InputError
    from judgecal.workspace import Workspace

    for k, v in aws_env(s3).items():
        monkeypatch.setenv(k, v)
    ws = Workspace(f"S3://{BUCKET}/excl")  # the scheme in any case
    assert ws.write_bytes("part-x.parquet", b"one", exclusive=True) is True
    assert ws.write_bytes("part-x.parquet", b"two", exclusive=True) is False  # If-None-Match: * -> 412
    assert ws.read_bytes("part-x.parquet") == b"one"
    with pytest.raises(InputError, match="NoSuchBucket"):
        Workspace("s3://no-such-bucket/x").write_json("study.json", {})
    with pytest.raises(InputError, match="'s3://': no bucket"):  # as typed (it said 's3:')
        Workspace("s3://")


def test_s3_requests_are_tried_ten_times_unless_aws_max_attempts_says(monkeypatch):
    """boto3 and pyarrow alike: S3's SlowDown throttles last seconds (tests/test_fault_campaign.py
    rides them through); AWS_MAX_ATTEMPTS, the variable both SDKs read, overrides."""
    import pyarrow.fs as pafs

    from judgecal.workspace import S3_ATTEMPTS, Workspace, _s3_options, s3_attempts

    monkeypatch.delenv("AWS_MAX_ATTEMPTS", raising=False)
    assert s3_attempts() == S3_ATTEMPTS == 10
    for value, tries in (("4", 4), ("0", 1), ("many", S3_ATTEMPTS)):
        monkeypatch.setenv("AWS_MAX_ATTEMPTS", value)
        assert s3_attempts() == tries
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "4")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    # tries in all, not retries (botocore's max_attempts would make 5)
    assert Workspace("s3://b/x").s3.meta.config.retries == {"mode": "standard", "total_max_attempts": 4}
    assert isinstance(_s3_options()["retry_strategy"], pafs.AwsStandardS3RetryStrategy)


def test_an_endpoint_that_is_no_url_or_not_up_is_one_line_at_once(tmp_path):
    """AWS_ENDPOINT_URL='htp://...' raised pyarrow's ArrowInvalid as a traceback (exit 1), and
    an endpoint with nothing listening kept `show` silent for 99 s before a storage error that
    never named the setting (a user's findings)."""
    from conftest import free_port

    dead = free_port()
    for url, says in (("http://127.0.0.1:99999", "judgecal: error: AWS_ENDPOINT_URL: 'http://127.0.0.1:99999': "
                                                 "the port is not a number from 0 to 65535"),
                      (f"htp://127.0.0.1:{dead}", f"judgecal: error: AWS_ENDPOINT_URL: 'htp://127.0.0.1:{dead}' "
                                                  "is not an http:// or https:// URL"),
                      (f"http://127.0.0.1:{dead}", f"judgecal: error: AWS_ENDPOINT_URL: http://127.0.0.1:{dead}: "
                                                   "cannot connect (Connection refused); is the S3 endpoint up")):
        env = {**os.environ, **aws_env(dead), "AWS_ENDPOINT_URL": url, "RAY_AUTH_MODE": "disabled"}
        t0 = time.monotonic()
        r = subprocess.run(judgecal_cmd("show", f"s3://{BUCKET}/x"), cwd=ROOT, env=env, capture_output=True,
                           text=True, timeout=120)
        assert r.returncode == 2 and r.stderr.strip().startswith(says), r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and time.monotonic() - t0 < 30, r.stderr


def collect_with_a_node(s3, tmp_path, node_endpoint: str, folder: str, attempts: str | None = "1"):
    """A PRISM collect on s3://BUCKET/folder through a one-node cluster whose node reaches S3 at
    ``node_endpoint`` (the driver at the real endpoint) with ``attempts`` tries a request (None:
    the clients' default); the CLI's result."""
    from ray_cluster import Cluster

    cluster = Cluster(cpus=1)  # the node's own endpoint; one attempt: a failure comes at once
    cluster.env.update({**aws_env(s3), "AWS_ENDPOINT_URL": node_endpoint})
    if attempts is not None:
        cluster.env["AWS_MAX_ATTEMPTS"] = attempts
    try:
        cluster.start(workers=0)
        cfg = write_config(tmp_path / "c.toml", PRISM)
        env = {**os.environ, **aws_env(s3), "RAY_AUTH_MODE": "disabled", "RAY_ADDRESS": cluster.gcs}
        return subprocess.run(judgecal_cmd("collect", str(cfg), "--set", f"study.output=s3://{BUCKET}/{folder}"),
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    finally:
        cluster.close()


def test_nodes_that_cannot_reach_the_bucket_are_named_before_any_request(s3, tmp_path):
    """A cluster whose node was started without the S3 endpoint (the driver's shell has it):
    the collect stopped after 86 s with ~200 lines of Ray's tracebacks and 'SystemException'
    (a user's finding). Each node lists the study's folder first; one line names the node."""
    from conftest import free_port

    r = collect_with_a_node(s3, tmp_path, f"http://127.0.0.1:{free_port()}", "unreached")  # nothing listens
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and re.search(r"the Ray workers on node \S+ \(\w{8}\) cannot reach it: "
                                           r"AWS_ENDPOINT_URL=http://127.0.0.1:\d+: cannot connect", last), \
        r.stderr[-3000:]
    assert "from its own environment, not the driver's: set AWS_ENDPOINT_URL" in last
    assert "Traceback" not in r.stderr and not [k for k in keys(s3, "unreached/responses/")]


def test_a_node_that_cannot_resolve_the_endpoint_is_named_without_waiting_for_the_clients_retries(s3, tmp_path):
    """An endpoint name the node cannot resolve, with the clients' default 10 tries: the node was
    named after ~84 s of boto3's backoff (a user's finding); one TCP connection names it first."""
    t0 = time.monotonic()
    r = collect_with_a_node(s3, tmp_path, "http://judgecal-no-such-host.invalid:9000", "unresolved", attempts=None)
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and re.search(r"the Ray workers on node \S+ \(\w{8}\) cannot reach it: AWS_ENDPOINT_URL="
                                           r"http://judgecal-no-such-host.invalid:9000: cannot connect \(", last), \
        r.stderr[-3000:]
    # ~84 s of retries before: the cluster's start and the CLI's Ray start take the rest
    assert time.monotonic() - t0 < 80 and not [k for k in keys(s3, "unresolved/responses/")], time.monotonic() - t0


def test_a_node_whose_endpoint_is_no_url_is_named_before_any_request(s3, tmp_path):
    """A node's own AWS_ENDPOINT_URL that is no URL (the driver's is fine): its check raised
    outside the probe's answer, which read as a node gone, and the collect went on (a reader)."""
    r = collect_with_a_node(s3, tmp_path, "minio:9000", "nourl")
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and re.search(r"the Ray workers on node \S+ \(\w{8}\) cannot reach it: AWS_ENDPOINT_URL: "
                                           r"'minio:9000' is not an http:// or https:// URL", last), r.stderr[-3000:]
    assert not [k for k in keys(s3, "nourl/responses/")]


def test_a_node_whose_credentials_may_read_but_not_write_is_named_before_any_request(s3, tmp_path):
    """Read-only credentials on a node passed the listing and failed at the first commit, after the
    first block was computed: each node also writes (and deletes) an empty probe object first."""
    proxy = CuttingProxy(s3)
    proxy.read_only = True
    try:
        r = collect_with_a_node(s3, tmp_path, f"http://127.0.0.1:{proxy.port}", "readonly")
    finally:
        proxy.close()
    last = r.stderr.strip().splitlines()[-1]
    assert r.returncode == 2 and re.search(r"the Ray workers on node \S+ \(\w{8}\) cannot write to it: storage "
                                           r"refused the write \(AccessDenied: Access Denied\)", last), r.stderr[-3000:]
    assert proxy.denied >= 1 and "credentials that may read and write the bucket" in last
    assert "Traceback" not in r.stderr
    assert not [k for k in keys(s3, "readonly/responses/")]  # no part, and no probe left


def test_a_missing_bucket_and_missing_credentials_are_named(s3, monkeypatch, tmp_path):
    """`report s3://nosuchbucket/x` said the folder 'holds no study.json'; `show` with no
    credentials said 'ACCESS_DENIED ... No response body' (a user's findings)."""
    for k, v in aws_env(s3).items():
        monkeypatch.setenv(k, v)
    env = {**os.environ, **aws_env(s3), "RAY_AUTH_MODE": "disabled"}
    r = subprocess.run(judgecal_cmd("report", "s3://no-such-bucket/x"), cwd=ROOT, env=env, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and "s3://no-such-bucket/x: no such bucket" in r.stderr, r.stderr
    bare = {k: v for k, v in env.items() if k not in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY",
                                                       "AWS_SESSION_TOKEN", "AWS_PROFILE")}
    bare.update(AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_CONFIG_FILE=str(tmp_path / "none"),
                AWS_EC2_METADATA_DISABLED="true")
    r = subprocess.run(judgecal_cmd("show", f"s3://{BUCKET}/x"), cwd=ROOT, env=bare, capture_output=True,
                       text=True, timeout=120)
    # pyarrow's read said ACCESS_DENIED without a word on credentials; it is named now, by either client
    assert r.returncode == 2 and ("no AWS credentials were found" in r.stderr
                                  or "NoCredentialsError: Unable to locate credentials" in r.stderr), r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_a_profile_that_is_not_there_is_said_in_the_storage_line(monkeypatch):
    """AWS_PROFILE naming no profile made the no-credentials hint itself raise ProfileNotFound:
    a traceback, exit 1 (a second reader's finding)."""
    from judgecal.workspace import storage_error

    for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("AWS_PROFILE", "no-such-profile")
    said = storage_error(OSError("AWS Error ACCESS_DENIED during HeadObject operation: No response body."))
    assert said.startswith("storage error (AWS Error ACCESS_DENIED") and \
        "the AWS credentials could not be read (ProfileNotFound" in said
