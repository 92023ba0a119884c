"""The cluster files, parsed and cross-checked against each other and the repository.

No Kubernetes, AWS or Docker here: these tests read cluster/*.yaml, cluster/Dockerfile (and its
.dockerignore), pyproject.toml and constraints.txt, and check what a typo would break before anyone
runs `kubectl apply`, `docker build` or `ray up`: kinds, resources, the GPU group, autoscaling
bounds, token authentication by Secret reference, image tags against the tested Ray version, and
that every path the RayJob's entrypoint names is in the image. The Dockerfile's RUN steps are
shell: they run here under /bin/sh with every command they call replaced by a stub that records
its arguments (nothing else on PATH), once per build variant, so the tests see the exact pip and
CMake arguments each variant would use. The launcher YAML goes through the same
`prepare_config` + `validate_config` that `ray up` runs (Ray's own schema).
"""

from __future__ import annotations

import ast
import builtins
import copy
import fnmatch
import importlib
import json
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "cluster"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
GPU_INSTANCE_FAMILIES = ("g4dn.", "g5.", "g6.", "g6e.", "p3.", "p4d.", "p4de.", "p5.", "p5e.", "p5en.")


def _bottom(name: str, deps: list[str]) -> str:
    """The bottom of ``name``'s range (``ray[data,default]>=2.60.0,<3`` -> ``2.60.0``): the tested version."""
    for dep in deps:
        m = re.fullmatch(rf"{name}(\[[^\]]*\])?\s*>=\s*([\w.]+)(,.*)?", dep.strip())
        if m:
            return m.group(2)
    raise AssertionError(f"pyproject.toml has no {name}>=... range")


RAY = _bottom("ray", PYPROJECT["project"]["dependencies"])
EXTRAS = PYPROJECT["project"]["optional-dependencies"]
VERSION = PYPROJECT["project"]["version"]


def _yaml(name: str) -> dict:
    return yaml.safe_load((CLUSTER / name).read_text())


def _dockerfile() -> dict:
    """BASE_IMAGE default, COPY destination, RUN steps, the last USER and every instruction (in order) of cluster/Dockerfile."""
    text = (CLUSTER / "Dockerfile").read_text()
    lines = [ln.strip() for ln in text.replace("\\\n", " ").splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    base = next(re.fullmatch(r"ARG BASE_IMAGE=(\S+)", ln).group(1) for ln in lines if ln.startswith("ARG BASE_IMAGE="))
    froms = [ln.split()[1] for ln in lines if ln.startswith("FROM ")]
    copies = [ln.split()[-2:] for ln in lines if ln.startswith("COPY ")]
    users = [ln.split()[1] for ln in lines if ln.startswith("USER ")]
    runs = [ln[4:] for ln in lines if ln.startswith("RUN ")]
    steps = [tuple(ln.split(None, 1)) if " " in ln else (ln, "") for ln in lines]
    return {"text": text, "base": base, "froms": froms, "copies": copies, "user": users[-1] if users else None,
            "runs": runs, "steps": steps}


DOCKER = _dockerfile()
APP = next(dest for src, dest in DOCKER["copies"] if src == ".").rstrip("/")  # where the repo lands in the image
CPU_BASE = DOCKER["base"]                                                      # rayproject/ray:<ray>-<py>
PY_TAG = CPU_BASE.rsplit("-", 1)[-1]                                           # e.g. py311
GPU_BASE = f"{CPU_BASE}-gpu"
CPU_IMAGE = f"judgecal:{VERSION}-ray{RAY}-{PY_TAG}"
GPU_IMAGE = f"{CPU_IMAGE}-gpu"


def _manifests() -> dict[str, dict]:
    return {"raycluster.yaml": _yaml("raycluster.yaml"), "rayjob.yaml": _yaml("rayjob.yaml")}


def _cluster_specs() -> list[tuple[str, dict]]:
    m = _manifests()
    return [("raycluster.yaml", m["raycluster.yaml"]["spec"]), ("rayjob.yaml", m["rayjob.yaml"]["spec"]["rayClusterSpec"])]


def _groups(spec: dict) -> list[tuple[str, dict]]:
    return [("head", spec["headGroupSpec"])] + [(g["groupName"], g) for g in spec["workerGroupSpecs"]]


def _containers(group: dict) -> list[dict]:
    return group["template"]["spec"]["containers"]


def _quantity(q) -> float:
    """A Kubernetes quantity (``2``, ``500m``, ``8Gi``, ``1.5G``) as a number."""
    s = str(q)
    units = {"m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", s)
    assert m and (m.group(2) in units or not m.group(2)), f"not a quantity: {q!r}"
    return float(m.group(1)) * units.get(m.group(2), 1)


def _strings(node):
    if isinstance(node, dict):
        for v in node.values():
            yield from _strings(v)
    elif isinstance(node, list):
        for v in node:
            yield from _strings(v)
    elif isinstance(node, str):
        yield node


def _in_image(path: str) -> Path:
    """The repository file an absolute image path comes from (it must be under the COPY destination)."""
    assert path == APP or path.startswith(APP + "/"), f"{path} is not in the image (only {APP}/ comes from the repo)"
    return ROOT / path[len(APP) + 1:]


def _ignored(rel: str) -> bool:
    patterns = [p.strip() for p in (CLUSTER / "Dockerfile.dockerignore").read_text().splitlines()
                if p.strip() and not p.startswith("#")]
    parts = rel.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatch(pre, pat) or fnmatch.fnmatch(pre, pat.removeprefix("**/"))
               or fnmatch.fnmatch(parts[i - 1], pat.removeprefix("**/"))
               for pat in patterns for i, pre in enumerate(prefixes, 1))


def _constraints() -> dict[str, str]:
    """constraints.txt at the repository root (``name==version`` lines): the versions the tests run at."""
    path = ROOT / "constraints.txt"
    assert path.is_file(), "constraints.txt is missing: the CPU image installs with -c constraints.txt"
    pins = {}
    for ln in path.read_text().splitlines():
        ln = ln.split("#", 1)[0].strip()
        if ln:
            m = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*==\s*([\w.+!\-]+)(\s*;.*)?", ln)
            assert m, f"constraints.txt: {ln!r} is not an exact pin"
            pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(3)
    return pins


# ---------------------------------------------------------------- the Dockerfile's RUN steps, run with stubs

STUBBED = ("apt-get", "rm", "mkdir", "chown", "pip", "python", "judgecal")
STUB = """#!{python}
import json, os, sys
with open(os.environ["STUB_LOG"], "a") as f:
    f.write(json.dumps({{"cmd": {name!r}, "argv": sys.argv[1:], "user": os.environ.get("STUB_USER"),
                        "env": {{k: os.environ[k] for k in ("CMAKE_ARGS", "FORCE_CMAKE") if k in os.environ}}}}) + "\\n")
"""


def _build(tmp_path: Path, **build_args: str) -> tuple[int, list[dict], str]:
    """Run cluster/Dockerfile's RUN steps in order, as `docker build --build-arg K=V` would, under /bin/sh
    with PATH holding only stubs of the commands they call (a command without a stub fails the step:
    nothing on this machine is touched). Returns the exit status of the last step run, the stubs'
    calls (with CMAKE_ARGS/FORCE_CMAKE as each saw them and the USER it ran as) and stderr."""
    stubs = tmp_path / "stubs"
    stubs.mkdir(exist_ok=True)
    for name in STUBBED:
        (stubs / name).write_text(STUB.format(python=sys.executable, name=name))
        (stubs / name).chmod(0o755)
    log = tmp_path / "calls.jsonl"
    log.unlink(missing_ok=True)
    glob_args, env, user, rc, err, staged = {}, {}, "root", 0, "", False
    for instr, rest in DOCKER["steps"]:
        if instr == "FROM":
            staged = True
        elif instr == "ARG":
            name, _, default = shlex.split(rest)[0].partition("=")
            value = build_args.get(name, default if "=" in rest else glob_args.get(name, ""))
            (env if staged else glob_args)[name] = value
        elif instr == "USER":
            user = rest.split(":")[0]
        elif instr == "RUN":
            assert not re.search(r"(?:^|&&|\|\||[;|()])\s*/", rest), "a RUN step calls a command by absolute path: stub it"
            proc = subprocess.run(["/bin/sh", "-c", rest], capture_output=True, text=True, cwd=tmp_path,
                                  env={**env, "PATH": str(stubs), "STUB_LOG": str(log), "STUB_USER": user})
            rc, err = proc.returncode, err + proc.stderr
            if rc:
                break
    calls = [json.loads(ln) for ln in log.read_text().splitlines()] if log.exists() else []
    return rc, calls, err


PIP_VALUE_OPTIONS = {"-c", "--constraint", "-r", "--requirement", "--no-binary", "--only-binary", "-i", "--index-url",
                     "--extra-index-url", "-f", "--find-links", "-e", "--editable", "-t", "--target", "--prefix"}


def _pip_install(argv: list[str], cwd: str | None = None) -> dict:
    """``pip install`` arguments -> {"targets", "options" (name -> values), "extras" (target -> set), "cmd"}."""
    assert argv[:1] == ["install"], argv
    targets, options, i = [], {}, 1
    while i < len(argv):
        a = argv[i]
        if a in PIP_VALUE_OPTIONS:
            options.setdefault(a.lstrip("-")[:1] if a in ("-c", "--constraint") else a, []).append(argv[i + 1])
            i += 2
            continue
        if a.startswith("-"):
            options.setdefault(a, []).append(True)
        else:
            targets.append(a)
        i += 1
    if cwd:  # ".[cpu]" or "constraints.txt" after `cd DIR`
        targets = [f"{cwd}{t[1:]}" if t == "." or t.startswith(".[") else t for t in targets]
        options["c"] = [c if c.startswith(("/", "~")) else f"{cwd}/{c}" for c in options.get("c", [])]
    extras = {}
    for t in targets:
        m = re.fullmatch(r"(.+?)\[([^\]]*)\]", t)
        extras[m.group(1) if m else t] = {e.strip() for e in m.group(2).split(",")} if m else set()
    return {"targets": targets, "options": options, "extras": extras}


def _judgecal_installs(calls: list[dict]) -> list[dict]:
    """The stubbed pip calls that install the repository's package (APP or APP[extras])."""
    out = []
    for c in calls:
        if c["cmd"] == "pip" and c["argv"][:1] == ["install"]:
            p = {**_pip_install(c["argv"]), "env": c["env"], "user": c["user"]}
            if APP in p["extras"]:
                out.append(p)
    return out


def _cmake_args(value: str) -> dict[str, str]:
    return dict(a[2:].split("=", 1) for a in shlex.split(value) if a.startswith("-D") and "=" in a)


# ---------------------------------------------------------------- KubeRay manifests

def test_manifests_are_kuberay_v1_of_the_right_kind():
    m = _manifests()
    assert (m["raycluster.yaml"]["apiVersion"], m["raycluster.yaml"]["kind"]) == ("ray.io/v1", "RayCluster")
    assert (m["rayjob.yaml"]["apiVersion"], m["rayjob.yaml"]["kind"]) == ("ray.io/v1", "RayJob")
    for doc in m.values():
        assert re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", doc["metadata"]["name"])


@pytest.mark.parametrize("name, spec", _cluster_specs())
def test_ray_version_and_images_match_the_pin(name, spec):
    assert spec["rayVersion"] == RAY, f"{name}: rayVersion {spec['rayVersion']} but pyproject pins ray=={RAY}"
    for gname, group in _groups(spec):
        for c in _containers(group):
            assert c["image"] in (CPU_IMAGE, GPU_IMAGE), f"{name} {gname}: image {c['image']} is not {CPU_IMAGE}[-gpu]"
            assert ":" in c["image"] and not c["image"].endswith(":latest")


@pytest.mark.parametrize("name, spec", _cluster_specs())
def test_every_container_has_requests_and_limits_with_limits_at_least_requests(name, spec):
    for gname, group in _groups(spec):
        for c in _containers(group):
            req, lim = c["resources"]["requests"], c["resources"]["limits"]
            for key in ("cpu", "memory"):
                assert key in req and key in lim, f"{name} {gname}: {key} needs requests and limits"
            for key, value in req.items():
                assert key in lim and _quantity(lim[key]) >= _quantity(value), \
                    f"{name} {gname}: limits.{key} must be >= requests.{key}"
            if "nvidia.com/gpu" in req or "nvidia.com/gpu" in lim:  # extended resources: requests == limits
                assert _quantity(req.get("nvidia.com/gpu", lim["nvidia.com/gpu"])) == _quantity(lim["nvidia.com/gpu"])


@pytest.mark.parametrize("name, spec", _cluster_specs())
def test_cpu_head_and_a_gpu_worker_group(name, spec):
    head = spec["headGroupSpec"]
    assert str(head["rayStartParams"]["num-cpus"]) == "0", f"{name}: the head should schedule, not judge"
    assert all("nvidia.com/gpu" not in c["resources"]["limits"] and c["image"] == CPU_IMAGE for c in _containers(head))
    gpu = [g for g in spec["workerGroupSpecs"]
           if any("nvidia.com/gpu" in c["resources"].get("limits", {}) for c in _containers(g))]
    assert gpu, f"{name}: no worker group has nvidia.com/gpu limits"
    for g in gpu:
        (c,) = _containers(g)
        n = _quantity(c["resources"]["limits"]["nvidia.com/gpu"])
        assert n >= 1
        assert _quantity(g["rayStartParams"]["num-gpus"]) == n, f"{name} {g['groupName']}: num-gpus != GPU limit"
        assert c["image"] == GPU_IMAGE, f"{name} {g['groupName']}: a GPU group needs the CUDA image {GPU_IMAGE}"
        assert any(t.get("key") == "nvidia.com/gpu" for t in g["template"]["spec"].get("tolerations", []))
    for g in spec["workerGroupSpecs"]:
        if g not in gpu:
            assert all(c["image"] == CPU_IMAGE for c in _containers(g))
            assert "num-gpus" not in g["rayStartParams"]


@pytest.mark.parametrize("name, spec", _cluster_specs())
def test_autoscaling_is_on_and_replica_bounds_are_sane(name, spec):
    assert spec["enableInTreeAutoscaling"] is True
    for g in spec["workerGroupSpecs"]:
        lo, n, hi = g["minReplicas"], g.get("replicas", g["minReplicas"]), g["maxReplicas"]
        assert all(isinstance(x, int) for x in (lo, n, hi))
        assert 0 <= lo <= n <= hi and hi >= 1, f"{name} {g['groupName']}: need 0 <= min <= replicas <= max, max >= 1"
    assert len({g["groupName"] for g in spec["workerGroupSpecs"]}) == len(spec["workerGroupSpecs"])


@pytest.mark.parametrize("name, spec", _cluster_specs())
def test_token_auth_by_secret_reference(name, spec):
    auth = spec["authOptions"]
    assert auth["mode"] == "token", f"{name}: authOptions.mode must be token"
    assert isinstance(auth.get("secretName"), str) and auth["secretName"], f"{name}: the token comes from a Secret"
    for gname, group in _groups(spec):
        for c in _containers(group):
            for env in c.get("env", []):
                if env["name"] == "RAY_AUTH_MODE":
                    assert env.get("value") == "token", f"{name} {gname}: RAY_AUTH_MODE={env.get('value')}"
                if env["name"] in ("RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
                    assert "value" not in env, f"{name} {gname}: {env['name']} written in clear text"


def test_no_token_literal_and_auth_never_disabled_in_any_cluster_file():
    for path in sorted(CLUSTER.glob("*.yaml")) + [CLUSTER / "Dockerfile"]:
        text = path.read_text()
        assert not re.search(r"RAY_AUTH_TOKEN\s*[=:]\s*\S", text), f"{path.name}: a token written in the file"
        assert not re.search(r"RAY_AUTH_MODE\W+disabled", text), f"{path.name}: authentication turned off"
        assert not re.search(r"auth_token['\"]?\s*:\s*['\"]?[A-Za-z0-9_\-]{16,}", text), f"{path.name}: token literal"
    for name, doc in _manifests().items():
        assert not [s for s in _strings(doc) if re.fullmatch(r"[A-Za-z0-9_\-+/=]{32,}", s)], f"{name}: token-like string"


def test_the_readmes_vllm_command_puts_every_pod_on_the_gpu_image():
    """cluster/README.md's sed line (a vLLM study needs vLLM on the head too) rewrites every image."""
    readme = (CLUSTER / "README.md").read_text()
    m = re.search(r"sed 's/([^/]+)\$/([^/]+)/' cluster/raycluster\.yaml \| kubectl apply -f -", readme)
    assert m, "cluster/README.md lacks the command that applies the RayCluster on the -gpu image"
    old, new = (x.replace("\\.", ".") for x in m.groups())
    assert (old, new) == (CPU_IMAGE, GPU_IMAGE)
    text = re.sub(re.escape(old) + "$", new, (CLUSTER / "raycluster.yaml").read_text(), flags=re.M)
    spec = yaml.safe_load(text)["spec"]
    images = {c["image"] for _, g in _groups(spec) for c in _containers(g)}
    assert images == {GPU_IMAGE}, images


# ---------------------------------------------------------------- the RayJob's entrypoint and the image

def _entrypoint() -> list[str]:
    return shlex.split(_manifests()["rayjob.yaml"]["spec"]["entrypoint"])


def test_rayjob_entrypoint_names_only_paths_the_image_has():
    argv = _entrypoint()
    assert argv[0] == "python"
    script, config = argv[1], argv[2]
    assert _in_image(script).is_file() and _in_image(script).parent.name == "jobs", f"{script} is not a jobs/ script"
    assert _in_image(config).is_file() and config.endswith(".toml"), f"{config} is not a config in the repo"
    for path in (script, config):
        assert not _ignored(str(_in_image(path).relative_to(ROOT))), f"{path} is left out of the image by .dockerignore"
    sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
    outputs = [s.split("=", 1)[1] for s in sets if s.startswith("study.output=")]
    assert outputs and outputs[-1].startswith("s3://"), "an ephemeral cluster must write its study to object storage"


def test_no_manifest_path_points_at_a_folder_the_image_lacks():
    runtime_env = _manifests()["rayjob.yaml"]["spec"].get("runtimeEnvYAML")
    if runtime_env:
        wd = (yaml.safe_load(runtime_env) or {}).get("working_dir")
        assert wd is None or re.match(r"(s3|gs|https)://", wd), f"working_dir {wd} is a path inside the pod"
    for name, doc in _manifests().items():
        for s in _strings(doc):
            for path in re.findall(r"(?<![\w:/.])(/(?:[\w.\-]+/)*[\w.\-]+)", s):
                assert _in_image(path).exists(), f"{name}: {path} does not exist in the image"


def test_the_entrypoint_config_loads_with_its_overrides():
    from judgecal.config import load_config

    argv = _entrypoint()
    sets = [argv[i + 1] for i, a in enumerate(argv) if a == "--set"]
    cfg = load_config(str(_in_image(argv[2])), sets)
    assert cfg.output.startswith("s3://") and cfg.collect.num_actors >= 1


def test_dockerfile_builds_on_the_tested_ray_image_and_documents_both_variants():
    assert CPU_BASE == f"rayproject/ray:{RAY}-{PY_TAG}", f"BASE_IMAGE {CPU_BASE} is not Ray {RAY}"
    need = tuple(int(x) for x in re.search(r">=\s*(\d+)\.(\d+)", PYPROJECT["project"]["requires-python"]).groups())
    assert (int(PY_TAG[2]), int(PY_TAG[3:])) >= need, f"{PY_TAG} is older than requires-python"
    assert DOCKER["froms"] == ["${BASE_IMAGE}"]
    assert DOCKER["user"] in ("ray", "1000"), "the image must end as Ray's user, not root"
    assert f"--build-arg VARIANT=gpu --build-arg BASE_IMAGE={GPU_BASE}" in DOCKER["text"], \
        "the GPU build (VARIANT=gpu on the CUDA base) is not documented"
    for image in (CPU_IMAGE, GPU_IMAGE):
        assert f"-t {image} " in DOCKER["text"], f"the Dockerfile does not build {image}"
    readme = (CLUSTER / "README.md").read_text()
    assert GPU_BASE in readme and CPU_IMAGE in readme and GPU_IMAGE in readme
    assert "docker build -f cluster/Dockerfile -t " + CPU_IMAGE in readme
    assert f"docker build -f cluster/Dockerfile --build-arg VARIANT=gpu --build-arg BASE_IMAGE={GPU_BASE}" in readme


def test_dockerfile_builds_llama_cpp_portably(tmp_path):
    text = DOCKER["text"]
    assert "march=native" not in text.lower() and "mtune=native" not in text.lower()
    assert not re.search(r"GGML_NATIVE=(ON|1|TRUE)", text, re.I), "llama.cpp would be tuned to the build machine"
    rc, calls, err = _build(tmp_path)  # the default build: VARIANT=cpu
    assert rc == 0, err
    (inst,) = [p for p in _judgecal_installs(calls) if "cpu" in p["extras"][APP]]
    cmake = _cmake_args(inst["env"].get("CMAKE_ARGS", ""))
    assert cmake.get("GGML_NATIVE", "").upper() == "OFF", f"CMAKE_ARGS {inst['env']} do not set GGML_NATIVE=OFF"
    assert cmake.get("GGML_CPU_ALL_VARIANTS", "").upper() == "ON", "no CPU variants: one ISA level for every node"
    assert cmake.get("GGML_BACKEND_DL", "").upper() == "ON", "GGML_CPU_ALL_VARIANTS requires GGML_BACKEND_DL"
    # llama-cpp-python 0.3.x's wheel would put the variant modules in site-packages/bin/, where
    # ggml_backend_load_all() never looks: they must go to a fixed folder compiled into libggml,
    # which the root step creates for the user pip runs as.
    backends = cmake.get("GGML_BACKEND_DIR", "")
    assert backends.startswith("/"), "GGML_BACKEND_DIR must be an absolute folder in the image"
    made = [c for c in calls if c["cmd"] == "mkdir" and backends in c["argv"] and c["user"] == "root"]
    owned = [c for c in calls if c["cmd"] == "chown" and backends in c["argv"] and c["argv"][0].split(":")[0] in (
        "1000", "ray")]
    assert made and owned and inst["user"] in ("ray", "1000"), f"{backends} is not created for user ray before pip"
    assert "llama-cpp-python" in inst["options"].get("--no-binary", []), \
        "a prebuilt llama-cpp-python wheel would skip CMAKE_ARGS: --no-binary llama-cpp-python"
    assert inst["env"].get("FORCE_CMAKE") == "1"
    apt = [c for c in calls if c["cmd"] == "apt-get" and "install" in c["argv"]]
    assert apt and {"build-essential", "cmake"} <= set(apt[0]["argv"]) and calls.index(apt[0]) < calls.index(
        next(c for c in calls if c["cmd"] == "pip")), "the compiler must be installed before pip builds llama.cpp"


def test_cpu_variant_installs_the_cpu_extra_with_the_constraints(tmp_path):
    rc, calls, err = _build(tmp_path, VARIANT="cpu")
    assert rc == 0, err
    installs = _judgecal_installs(calls)
    assert [p for p in installs if "cpu" in p["extras"][APP]], f"no pip install {APP}[cpu] in the CPU variant"
    for p in installs:
        assert p["options"].get("c") == [f"{APP}/constraints.txt"], f"{p['targets']}: not installed with -c constraints.txt"
        assert "vllm" not in p["extras"][APP] and not any("vllm" in t or "ray[llm]" in t for t in p["targets"])
    assert (ROOT / "constraints.txt").is_file() and not _ignored("constraints.txt"), \
        "constraints.txt must exist and be in the build context"
    _constraints()  # parses: exact pins only
    ran = [c["argv"] for c in calls if c["cmd"] == "python"]
    assert any("Llama(" in " ".join(a) for a in ran), "the CPU image is not checked to load the bundled model"


def test_gpu_variant_installs_the_vllm_extra_with_ray_llm(tmp_path):
    rc, calls, err = _build(tmp_path, VARIANT="gpu", BASE_IMAGE=GPU_BASE)
    assert rc == 0, err
    (inst,) = _judgecal_installs(calls)
    assert "vllm" in inst["extras"][APP] and "cpu" not in inst["extras"][APP]
    assert f"ray[llm]=={RAY}" in inst["targets"], f"the GPU variant must install ray[llm]=={RAY} (it brings vLLM)"
    assert not [c for c in calls if c["cmd"] == "apt-get"], "the GPU variant needs no compiler"
    assert "CMAKE_ARGS" not in inst["env"]
    ran = [" ".join(c["argv"]) for c in calls if c["cmd"] == "python"]
    assert any("require_vllm" in a for a in ran), "the GPU image is not checked to have vLLM"


def test_dockerfile_refuses_a_wrong_variant_or_a_gpu_build_on_the_cpu_base(tmp_path):
    rc, calls, err = _build(tmp_path, VARIANT="tpu")
    assert rc != 0 and "VARIANT" in err and not [c for c in calls if c["cmd"] == "pip"]
    rc, calls, err = _build(tmp_path, VARIANT="gpu")  # BASE_IMAGE left at the CPU image
    assert rc != 0 and "CUDA" in err and not [c for c in calls if c["cmd"] == "pip"]


def test_the_extras_the_images_install_exist_in_pyproject(tmp_path):
    named = set()
    for variant, base in (("cpu", CPU_BASE), ("gpu", GPU_BASE)):
        rc, calls, err = _build(tmp_path, VARIANT=variant, BASE_IMAGE=base)
        assert rc == 0, err
        for p in _judgecal_installs(calls):
            named |= p["extras"][APP]
    assert {"cpu", "vllm"} <= named
    assert named <= set(EXTRAS), f"extras {sorted(named - set(EXTRAS))} are not in [project.optional-dependencies]"
    assert _bottom("ray", EXTRAS["vllm"]) == RAY, "the [vllm] extra's ray range starts elsewhere"


def test_ray_version_agrees_across_pyproject_constraints_and_dockerfile(tmp_path):
    assert _constraints().get("ray") == RAY, f"constraints.txt must pin ray=={RAY} (pyproject's range bottom)"
    assert re.fullmatch(rf"rayproject/ray:{re.escape(RAY)}-py\d+", CPU_BASE)
    checked = re.findall(r"ray\.__version__ == '([^']+)'", DOCKER["text"])
    assert checked and set(checked) == {RAY}, f"the build checks Ray {checked}, not {RAY}"
    assert set(re.findall(r"ray\[llm\]==([\w.]+)", DOCKER["text"])) == {RAY}
    assert not re.search(r"\bray(\[[^\]]*\])?==(?!" + re.escape(RAY) + r"\b)", DOCKER["text"])


def test_the_python_checks_in_the_dockerfile_name_real_code(tmp_path):
    codes = []
    for variant, base in (("cpu", CPU_BASE), ("gpu", GPU_BASE)):
        rc, calls, err = _build(tmp_path, VARIANT=variant, BASE_IMAGE=base)
        assert rc == 0, err
        codes += [c["argv"][1] for c in calls if c["cmd"] == "python" and c["argv"][:1] == ["-c"]]
        assert [c["argv"] for c in calls if c["cmd"] == "judgecal"] == [["--help"]]
    assert len(codes) >= 4
    for code in codes:
        tree = ast.parse(code, "<Dockerfile>")
        known = set(dir(builtins))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                known |= {(a.asname or a.name).split(".")[0] for a in node.names}
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                known.add(node.id)
        unknown = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - known
        assert not unknown, f"the Dockerfile's python -c uses undefined names {sorted(unknown)}: {code}"
        for mod, names in re.findall(r"from (judgecal[\w.]*) import ([\w, ]+)", code):
            m = importlib.import_module(mod)  # judgecal imports llama_cpp and vllm lazily: this works without them
            for name in names.split(","):
                assert hasattr(m, name.strip()), f"the Dockerfile calls {mod}.{name.strip()}, which does not exist"


def test_dockerignore_keeps_local_state_out_and_the_package_in():
    for rel in (".venv/bin/python", ".git/HEAD", "runs/demo/results.json"):
        assert _ignored(rel), f"{rel} would be sent into the image"
    for rel in ("pyproject.toml", "README.md", "judgecal/__init__.py", "judgecal/configs/demo.toml",
                "jobs/study.py", "jobs/collect.py"):
        assert (ROOT / rel).is_file() and not _ignored(rel), f"{rel} must be in the image"


# ---------------------------------------------------------------- the AWS cluster launcher

def _launcher() -> dict:
    return _yaml("cluster-launcher.yaml")


def test_launcher_passes_rays_own_config_validation():
    from ray.autoscaler._private.util import prepare_config, validate_config

    validate_config(prepare_config(copy.deepcopy(_launcher())))  # what `ray up` runs before it starts anything


def test_launcher_has_a_cpu_head_and_a_gpu_node_type_with_sane_bounds():
    cfg = _launcher()
    assert cfg["provider"]["type"] == "aws"
    types = cfg["available_node_types"]
    head = cfg["head_node_type"]
    assert head in types and types[head]["resources"].get("CPU") == 0 and "GPU" not in types[head]["resources"]
    gpu = {k: t for k, t in types.items() if t["resources"].get("GPU", 0) >= 1}
    assert gpu, "no node type with resources GPU"
    for t in gpu.values():
        assert t["node_config"]["InstanceType"].startswith(GPU_INSTANCE_FAMILIES)
        assert t["docker"]["worker_image"] == f"rayproject/ray:{RAY}-{PY_TAG}-gpu"
    workers = {k: t for k, t in types.items() if k != head}
    for k, t in workers.items():
        assert 0 <= t.get("min_workers", 0) <= t["max_workers"] <= cfg["max_workers"], k
    assert sum(t.get("min_workers", 0) for t in workers.values()) <= cfg["max_workers"]


def test_launcher_images_installs_and_auth():
    cfg = _launcher()
    docker = cfg["docker"]
    images = [docker.get("image"), docker.get("head_image"), docker.get("worker_image")]
    images += [t.get("docker", {}).get("worker_image") for t in cfg["available_node_types"].values()]
    for image in filter(None, images):
        assert image in (f"rayproject/ray:{RAY}-{PY_TAG}", f"rayproject/ray:{RAY}-{PY_TAG}-gpu"), image
    mounts = cfg["file_mounts"]
    repo = [dst for dst, src in mounts.items() if src in (".", "./")]
    assert repo, "the repository is not copied to the nodes"
    installs = []
    for cmd in cfg["setup_commands"]:
        cwd = None
        for part in re.split(r"\s*(?:&&|;)\s*", cmd):
            argv = shlex.split(part)
            if argv[:1] == ["cd"]:
                cwd = argv[1]
            elif argv[:2] == ["pip", "install"]:
                installs.append(_pip_install(argv[1:], cwd))
    matches = [p for p in installs if repo[0] in p["extras"]]
    assert len(matches) == 1, f"no (or more than one) setup command installs the repository copy {repo[0]}"
    inst = matches[0]
    assert "cpu" in inst["extras"][repo[0]] and inst["extras"][repo[0]] <= set(EXTRAS), \
        "the nodes run the CPU judge: install the [cpu] extra (and only extras pyproject has)"
    assert inst["options"].get("c") == [f"{repo[0]}/constraints.txt"], "install with the repository's constraints.txt"
    assert {".venv", ".git"} <= set(cfg.get("rsync_exclude", []))
    assert "-e RAY_AUTH_MODE=token" in docker["run_options"]
    token = {dst: src for dst, src in mounts.items() if dst.endswith(".ray/auth_token")}
    assert token and all(src.startswith(("~", "/")) for src in token.values()), "the token file must be mounted"


def test_cluster_readme_has_the_commands():
    readme = (CLUSTER / "README.md").read_text()
    for cmd in ("kubectl apply -f cluster/raycluster.yaml", "kubectl apply -f cluster/rayjob.yaml",
                "kubectl get rayjob", "kubectl create secret generic", "ray job submit", "ray job logs",
                "ray up cluster/cluster-launcher.yaml", "ray down cluster/cluster-launcher.yaml",
                "kubectl delete -f cluster/raycluster.yaml", "RAY_AUTH_MODE=token", "docker build -f cluster/Dockerfile"):
        assert cmd in readme, f"cluster/README.md lacks `{cmd}`"
