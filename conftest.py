"""Hypothesis profiles for the property tests: `ci` (default, fast) and `nightly` (thorough).

Select with `pytest --hypothesis-profile nightly`.
"""

from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=60, deadline=None)
settings.register_profile("nightly", max_examples=5000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")
