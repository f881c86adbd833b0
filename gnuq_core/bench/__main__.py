"""``python -m gnuq_core.bench``: see `gnuq_core.bench.run`."""

from gnuq_core.bench.run import main

if __name__ == "__main__":
    raise SystemExit(main())
