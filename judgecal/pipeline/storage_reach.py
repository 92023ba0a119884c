"""Before a collect fans out: every Ray node's workers can reach the study's object storage.

A node takes the S3 endpoint, region and credentials from its own environment (the one it
was started in, plus a job's ``runtime_env``), not from the driver's shell. A cluster whose
nodes cannot reach the bucket failed inside Ray Data's actors: some 200 lines of Ray's
tracebacks and a last line naming ``SystemException`` (a user's finding). One task per alive
node lists the store's folder with that node's environment, and a node that cannot is named
in one line before any request is sent. Local folders are not checked (a local Ray's workers
share the driver's machine and environment).
"""

from __future__ import annotations

from judgecal.errors import InputError


def _list(store) -> str:
    """'' where this worker lists ``store``, else why not (as text: judgecal's errors do not
    travel back through Ray's exception serialization)."""
    try:
        store.parts()
    except Exception as e:  # noqa: BLE001 - reported by the driver
        return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return ""


def check_nodes_reach(store) -> None:
    """Refuse in one line when a node's workers cannot list ``store`` (an S3 store only)."""
    if not store.ws.is_s3:
        return
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    probe = ray.remote(num_cpus=0, max_retries=0)(_list)
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    pending = {probe.options(scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False))
               .remote(store): n.get("NodeManagerAddress", n["NodeID"]) for n in nodes}
    for ref, where in pending.items():
        why = ray.get(ref)
        if why:
            raise InputError(store.uri, f"the Ray workers on node {where} cannot reach it: {why}. A node reads the "
                             "S3 endpoint and credentials from its own environment, not the driver's: set "
                             "AWS_ENDPOINT_URL (if not AWS) and credentials where the node starts, or give an "
                             "instance role (README, Ray notes)") from None
