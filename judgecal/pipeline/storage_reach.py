"""Before a collect fans out: every Ray node's workers can reach the study's object storage.

A node takes the S3 endpoint, region and credentials from its own environment (the one it
was started in, plus a job's ``runtime_env``), not from the driver's shell. A cluster whose
nodes cannot reach the bucket failed inside Ray Data's actors: some 200 lines of Ray's
tracebacks and a last line naming ``SystemException`` (a user's finding). One task per alive
node lists the store's folder with that node's environment and writes an empty probe object
there (then deletes it), and a node that cannot is named in one line before any request is
sent: credentials that may read but not write failed only at the first commit, after the
first block's answers were computed. Local folders and a local Ray (no ``RAY_ADDRESS``: its
workers share the driver's environment, which wrote the study's plan) are not checked.
"""

from __future__ import annotations

import uuid

from judgecal.errors import InputError

PROBE_DEADLINE_S = 300.0  # the S3 clients' own retries take up to ~100 s; a draining node never runs it
# never a part (readers and sweeps list part-*.parquet only); a node that may create but not
# delete objects leaves this empty one behind
PROBE_PREFIX = "_reach-"


def _reach(store) -> tuple[str, str]:
    """("", "") where this worker lists ``store`` and writes in it, else (what failed, why),
    redacted here with this node's own environment (as text: judgecal's errors do not travel
    back through Ray's serialization)."""
    from judgecal.redact import redact
    from judgecal.workspace import unanswered_endpoint

    step = "reach"
    try:  # an endpoint this node cannot resolve or connect to: at once, not after ~84 s of the clients' retries
        missed = unanswered_endpoint()
    except InputError as e:  # this node's endpoint is no URL: named with its variable
        return step, redact(str(e))
    if missed:
        return step, redact(f"{missed[0]}={missed[1]}")
    try:
        store.parts()
        step, probe = "write to", f"{PROBE_PREFIX}{uuid.uuid4().hex}"
        store.ws.write_bytes(probe, b"", exclusive=True)
        try:
            store.ws.delete(probe)
        except Exception:  # noqa: BLE001 - writing is what a collect needs; the probe is empty
            pass
    except InputError as e:
        return step, redact(e.problem)
    except Exception as e:  # noqa: BLE001 - reported by the driver
        return step, redact(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)
    return "", ""


def check_nodes_reach(store) -> None:
    """Refuse in one line when a node's workers cannot list or write ``store`` (S3 only). A
    node Ray cannot run the check on (gone, draining, its worker failing to start) is left to
    the collect, which meets it the same way with or without this check."""
    if not store.ws.is_s3:
        return
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(num_cpus=0, max_retries=0)(_reach)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    pending = {probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
               .remote(store): f"{n.get('NodeManagerAddress', '?')} ({n['NodeID'][:8]})" for n in nodes}
    ready, late = ray.wait(list(pending), num_returns=len(pending), timeout=PROBE_DEADLINE_S)
    for ref in late:
        ray.cancel(ref, force=True)
    for ref in ready:
        try:
            step, why = ray.get(ref)
        except ray.exceptions.RayError:  # not a storage answer: the node went away, its worker did not start
            continue
        if step:
            raise InputError(store.uri, f"the Ray workers on node {pending[ref]} cannot {step} it: {why}. A node "
                             "reads the S3 endpoint and credentials from its own environment, not the driver's: set "
                             "AWS_ENDPOINT_URL (if not AWS) and credentials that may read and write the bucket where "
                             "the node starts, or give an instance role (README, Ray notes)")
