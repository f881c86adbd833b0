"""The efficiency benchmark (chapter 07, ``make bench``): times the engine's own functions.

``python -m gnuq_core.bench --out bench/results.json``. `run` drives it; `clock` measures
wall time and peak memory.
"""
