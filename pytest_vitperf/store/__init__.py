"""Where runs are kept: baselines in per-version JSON files (baselines.py), the history of medians in a folder
(history.py) or a database many hosts share (sql.py, its schema in migrations/). Storing judges nothing: the gate
that reads these is verdicts/baselines/."""
