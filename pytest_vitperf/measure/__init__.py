"""Measuring: the device and its clocks, the timers and the sampling loop, the interleaved rounds of a family,
Measurement as data, and where an engine's time goes (kernels, layers)."""
