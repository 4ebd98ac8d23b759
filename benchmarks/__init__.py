"""Benchmarks: each model's per-iteration time against its floating-point floor, in one run.

Run with ``python -m benchmarks`` (``make bench``); ``--quick`` uses small problems.
"""
