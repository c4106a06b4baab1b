"""tools/intervals.py, the table of A/A and sensitivity runs, on a stored H100 run: it judges a floor at the level
the run itself judged it (the floors that matched the run's rows, not every entry of the file), and a JSON cut short
by a killed process is left out with one line instead of ending the table."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "tests" / "data" / "h100-vit_base-rounds-benchmark.json"


def test_intervals_judges_at_the_runs_level_and_leaves_out_a_cut_file(tmp_path: Path) -> None:
    cut = tmp_path / "cut.json"
    cut.write_text(RUN.read_text()[:2000])
    out = subprocess.run(
        [sys.executable, "tools/intervals.py", str(RUN), str(cut), "--floors", "suites/floors.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    # suites/floors.json holds 8 entries; 2 match this H100 run (FP8 b1 and b64): 95% over 2 floors x 3 looks
    assert "fp8: floor 1.02: pass at 99.17% 1, floor 1.12: inconclusive at 99.17% 1" in out.stdout
    assert out.stderr.strip().splitlines() == [
        f"left out: pytest-benchmark JSON {cut}: is not valid JSON: Unterminated string starting at line 69, column 17"
    ]
