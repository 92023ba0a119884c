"""llama.cpp's AMX kernels kept out of the embedded judge.

llama-cpp-python compiles llama.cpp for the installing machine's CPU. On an Intel CPU with AMX
(Sapphire Rapids and later: ``AMX_INT8 = 1`` in ``llama_print_system_info``), llama.cpp moves
the model's quantized weights into its AMX buffer at load time, and on such machines here the
first ``llama_decode`` of a batch crashed the process with a segmentation fault (SmolLM2's Q4_1
and Gemma 3's Q4_K_M alike; upstream ggml-org/llama.cpp#20824 is the same crash, unfixed).
:func:`avoid_amx` makes every model that llama-cpp-python loads in this process keep its
weights in ordinary CPU buffers (``use_extra_bufts = false``: no AMX, and no CPU_REPACK
either, which llama.cpp offers only as the same kind of extra buffer). A CPU without AMX, or
a build without it, is left as it is.
"""

from __future__ import annotations

_patched = False


def amx_built_in() -> bool:
    """Whether this process's llama.cpp was compiled with its AMX kernels, or the CPU has AMX: a
    build that loads its CPU backend at run time (the cluster image's ``GGML_BACKEND_DL``) may
    not have loaded it yet when asked, and on a CPU with AMX it would pick the AMX variant."""
    import llama_cpp

    if b"AMX_INT8 = 1" in llama_cpp.llama_print_system_info():
        return True
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            return any(line.startswith("flags") and " amx_int8" in line for line in f)
    except OSError:
        return False


def avoid_amx() -> bool:
    """From now on in this process, models load without llama.cpp's extra buffers where its
    AMX kernels are built in (see the module docstring). Returns whether it did so."""
    global _patched
    if _patched:
        return True
    if not amx_built_in():
        return False
    import llama_cpp.llama_cpp as lib

    defaults = lib.llama_model_default_params

    def model_params():  # what llama_cpp.Llama and llama_cpp.server load every model with
        params = defaults()
        params.use_extra_bufts = False
        return params

    lib.llama_model_default_params = model_params
    _patched = True
    return True


def run_server() -> None:
    """``python -m judgecal.engines.llamacpp_amx ARGS``: ``llama_cpp.server`` with its models
    loaded as :func:`avoid_amx` loads them (its own ``python -m llama_cpp.server`` crashed on
    an AMX CPU as the embedded judge did)."""
    import runpy

    avoid_amx()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    run_server()
