"""Judging: the statistics shared by every verdict (intervals, three-outcome decisions, multiple-comparison control),
speedup floors, accuracy bounds, and stored baselines with their gate, history and upgrade report."""
