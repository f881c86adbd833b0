"""Loaded by every Python process the tests start (PYTHONPATH): turn on the network guard."""

import os

if os.environ.get("GNUQ_BLOCK_NETWORK") == "1":
    from gnuq_core.repro import netguard

    netguard.install()
