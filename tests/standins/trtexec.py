"""A stand-in for trtexec that behaves like trtexec where the trtexec backend calls it, for the machines where TensorRT
cannot be installed. Read from samples/trtexec/trtexec.cpp, samples/common/sampleOptions.cpp, sampleReporting.cpp and
logging.h of NVIDIA/TensorRT (release/10.8 to release/11.1):
- the banner `&&&& RUNNING TensorRT.trtexec [TensorRT v101300] [b35] # trtexec ...` on stdout, of the version in
  STANDIN_TRTEXEC_VERSION (10.16.0.23 unless set);
- an option it does not know: its help on stdout, `[E] Unknown option: ...` on stderr, `&&&& FAILED` and exit 1;
- 10.x graphs only with --useCudaGraph and has no --noCudaGraph; 11.x graphs unless --noCudaGraph, and warns that
  --useCudaGraph and --noDataTransfers are deprecated;
- --exportTimes, --exportProfile and --exportOutput in trtexec's layouts; --exportLayerInfo copies the file beside
  the file named in STANDIN_TRTEXEC_LAYERS. A timed inference takes 8.0 ms in a CUDA graph and 8.4 ms enqueued.
- an engine it builds records whether TF32 was allowed; one whose path holds "fail" is not an engine.
Run as `#!python` wrapper scripts named trtexec (tests/test_trtexec.py).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import time

VERSION = os.environ.get("STANDIN_TRTEXEC_VERSION", "10.16.0.23")
MAJOR, MINOR, PATCH, BUILD = (int(p) for p in VERSION.split("."))
VALUES = {"onnx", "saveEngine", "loadEngine", "profilingVerbosity", "timingCacheFile", "sparsity", "loadInputs",
          "warmUp", "duration", "iterations", "exportTimes", "exportProfile", "exportLayerInfo",
          "exportOutput"}  # fmt: skip
FLAGS = {"help", "stronglyTyped", "noTF32", "noDataTransfers", "useCudaGraph"} | (
    {"noCudaGraph", "includeDataTransfers"} if MAJOR >= 11 else set()
)
HELP = """=== Build Options ===
  --noTF32                           Disable tf32 precision (default is to enable tf32, in addition to fp32)
  --errorOnTimingCacheMiss           Emit error when a tactic being timed is not present in the timing cache \
(default = false)
=== Inference Options ===
  --exportOutput=<file>       Write the output tensors to a json file (default = disabled)
"""


def log(severity: str, text: str) -> None:
    stamp = time.strftime("[%m/%d/%Y-%H:%M:%S]")
    print(f"{stamp} [{severity}] {text}", file=sys.stderr if severity in "EW" else sys.stdout)


def main(argv: list[str]) -> int:
    name = f"TensorRT.trtexec [TensorRT v{MAJOR * 10000 + MINOR * 100 + PATCH}] [b{BUILD}]"
    command = " ".join(["trtexec", *argv])
    print(f"&&&& RUNNING {name} # {command}")

    def failed() -> int:
        print(f"&&&& FAILED {name} # {command}")
        return 1

    args: dict[str, str] = {}
    unknown = []
    for a in argv:
        key, eq, value = a.removeprefix("--").partition("=")
        if not a.startswith("--") or (key in VALUES) != bool(eq) or key not in VALUES | FLAGS:
            unknown.append(a)
        args[key] = value
    if unknown:
        print(HELP)
        for a in unknown:
            log("E", f"Unknown option: {a} ")
        return failed()
    if "help" in args:
        print(HELP)
        return 0
    if MAJOR >= 11:
        for old in ("useCudaGraph", "noDataTransfers"):
            if old in args:
                log("W", f"--{old} is deprecated.")
    graph = "noCudaGraph" not in args if MAJOR >= 11 else "useCudaGraph" in args
    if "onnx" in args:
        with open(args["saveEngine"], "w") as f:
            json.dump({"tf32": "noTF32" not in args, "strongly_typed": "stronglyTyped" in args}, f)
        print(f"&&&& PASSED {name} # {command}")
        return 0
    if "fail" in args.get("loadEngine", ""):
        log("E", "Error[1]: IRuntime::deserializeCudaEngine: Error Code 1: Serialization (the engine file is corrupt)")
        log("E", "Engine deserialization failed")
        return failed()
    export(args, graph)
    print(f"&&&& PASSED {name} # {command}")
    return 0


def export(args: dict[str, str], graph: bool) -> None:
    """The files of an inference run, in trtexec's layouts."""
    n = int(args.get("iterations", "10"))
    if "exportTimes" in args:
        ms = 8.0 if graph else 8.4
        keys = ("startEnqMs", "endEnqMs", "startH2dMs", "endH2dMs", "startComputeMs", "endComputeMs", "startD2hMs",
                "endD2hMs", "h2dMs", "computeMs", "d2hMs", "latencyMs")  # fmt: skip
        rows = []
        for i in range(n):
            t = 1000.0 + i * ms + 0.001 * (i % 3)
            values = (t, t + 0.01, t, t, t, t + ms, t + ms, t + ms, 0, ms + 0.001 * (i % 3), 0, ms + 0.001 * (i % 3))
            rows.append("{ " + ", ".join(f'"{k}" : {v:g}' for k, v in zip(keys, values, strict=True)) + " }")
        with open(args["exportTimes"], "w") as f:
            f.write("[\n  " + "\n, ".join(rows) + "\n]\n")
    if "exportProfile" in args:
        layers = [("patch_embed.proj", 0.1), ("blocks.0.attn.qkv", 0.3), ("blocks.0.mlp.fc1", 0.4)]
        total = sum(ms for _, ms in layers) * n
        with open(args["exportProfile"], "w") as f:
            f.write(f'[\n  {{ "count" : {n} }}\n')
            for layer, ms in layers:
                f.write(f', {{ "name" : "{layer}", "timeMs" : {ms * n:g}, "averageMs" : {ms:g}, "medianMs" : '
                        f'{ms:g}, "percentage" : {ms * n / total * 100:g} }}\n')  # fmt: skip
            f.write("]\n")
    if "exportLayerInfo" in args:
        shutil.copy(os.environ["STANDIN_TRTEXEC_LAYERS"], args["exportLayerInfo"])
    if "exportOutput" in args:
        import numpy as np

        _, path = args["loadInputs"].split(":")
        x = np.fromfile(path, dtype=np.float16).reshape(2, -1).astype(np.float32)
        values = ", ".join(repr(float(v)) for v in x.mean(axis=1))
        with open(args["exportOutput"], "w") as f:
            f.write(f'[\n  {{ "name" : "logits"\n  , "dimensions" : "2x1"\n  , "values" : [ {values} ]\n  }}\n]\n')


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
