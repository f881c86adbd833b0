"""Sphinx extension: glued figures as ``<picture>`` elements whose narrow rendering the
browser picks on a phone (:mod:`gnuq_core.repro.picture`)."""

from gnuq_core.repro.picture import setup

__all__ = ["setup"]
