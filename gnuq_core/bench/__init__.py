"""The efficiency benchmark (chapter 07, ``make bench``): times the engine's own functions.

``gnuq bench --out bench/results.json`` (see `gnuq_core.bench.__main__`).
Nothing here re-implements a pass of the QA engine: every timed call is a function of
`gnuq_core.lm` or `gnuq_core.qa`.

==============  ==========================================================================
module          what it holds
==============  ==========================================================================
``config``      `BenchConfig` (everything that changes a number) and the targets
``subjects``    the models under test: real, tiny, random of real sizes; saved for workers
``questions``   the fixed question set, with answers and samples prepared untimed
``passes``      the timed passes (engine function + arguments) and the interleaved timer
``clock``       wall / CPU time of one call, the forward/backward split
``memory``      peak extra memory per pass (a separate process on CPU)
``scaling``     cost against answer length, prompt length and model size
``profiler``    torch.profiler's top operators of one forward and one gradient pass
``throughput``  records per hour of the whole QA pipeline in worker processes; full-study estimate
``summary``     medians, paired ratios with intervals over questions, method costs from the
                score registry `gnuq_core.qa.scores`, claim C8, targets
``report``      the tables (rows for the chapter, plain text for ``make bench``)
``run``         the driver
==============  ==========================================================================
"""
