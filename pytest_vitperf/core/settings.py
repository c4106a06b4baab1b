"""The run's settings: what the command line, the ini file and the defaults resolve to (options.py resolves them).
Plain data, read by every layer that needs one (backends, the session, the fixtures), never by `getoption`."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

# trtexec warns ("unstable performance") when the coefficient of variation of GPU compute time exceeds 1.0%
# (kUNSTABLE_PERF_REPORTING_THRESHOLD in samples/common/sampleReporting.cpp).
NOISY_COV = 0.01


@dataclass(frozen=True)
class Settings:
    """Options after command line, ini file and defaults are combined."""

    enabled: bool = False
    backend: str = "auto"
    precisions: tuple[str, ...] | None = None
    batch_sizes: tuple[int, ...] | None = None
    models: tuple[str, ...] | None = None
    warmup_ms: float | None = None  # None: the device's default, see VitperfSession.timing
    duration_ms: float = 3000.0
    min_iterations: int = 10
    cuda_graph: bool = True
    clocks: bool = True
    compile: str = "auto"
    cache_dir: Path | None = None
    floors: Path | None = None
    baseline_dir: Path | None = None
    history: Path | None = None
    store: str | None = None  # a database URL, or a file that becomes a SQLite one
    export: tuple[tuple[str, Path], ...] = ()
    report: Path | None = None
    regression_threshold: float = 0.03
    false_alarm: float = 0.05
    board_spread: float = 0.02
    noise_threshold: float = NOISY_COV
    max_noise: float | None = None
    accuracy_bound: dict[str, float] | None = None
    accuracy_data: Path | None = None  # an ImageFolder of the user's labelled images; None: the digits task
    timeout_ms: float = 15000.0
    update_baselines: bool = False
    strict: bool = False
    record_run: bool = False
    store_baselines: bool = False  # the gate reads the store's runs instead of baseline_dir's files
    kernels: bool = False
    cold: bool = False
    gemm_hot: bool = False
    share_devices: bool = False
    build_apart: bool = False  # each test builds only its own engine (vitperf ab's prepare)
    rounds: int = 20
    rounds_agree: float = 0.001  # above 0: rounds end once they agree this closely (measure.rounds.disagreement)
    first_look: int = 6  # a family with floors ends after this many rounds where they are all settled; 0: never
    builds: int = 2
    slice_ms: float = 200.0
    round_budget_s: float = 60.0
    confidence: float = 0.95
    inconclusive: str = "warn"
    seed: int | None = None  # None: drawn per run, and recorded in every measurement of a family
    inject_delay: tuple[tuple[str, float], ...] = ()
    units: Path | None = None  # a file of the units to run (vitperf ab --gpus); None: all
    shard: tuple[int, int] | None = None  # (K, N): the K-th of N shards of the run's units (workers.deal)
    threads: int | None = None  # None: the process's share of the host (workers.share_host)
    wait_for: Path | None = None  # vitperf ab's turn file: no test runs until it exists
    turn_done: Path | None = None  # touched once the last test has run: the next process's turn may begin
    relay: Path | None = None  # vitperf ab's relay file: the GPU a family at a time with the round's other process
    weights: tuple[tuple[str, str | Path], ...] = ()  # (model, file or "pretrained")
    rootdir: Path = field(default_factory=Path.cwd)
