"""ThinkingBox-Bench in Inspect (`pip install 'tbx[inspect]'`): the task `tbx/thinkingbox_bench`
and the sandbox environment `tbx`, registered through Inspect's `inspect_ai` entry point
(`tbx._registry`). Each sample is one tbx attempt opened and closed by bench's one
lifecycle; the scorer is tbx's judge. Nothing of tbx imports this package (docs/inspect.md).

config.py   the sandbox environment's configuration (dataset, release, limits)
host.py     what the samples of one task share: benchmark, provider and pools, tool proxy, golden store
sandboxenv.py  the `tbx` sandbox environment: one held attempt per sample
roles.py    Inspect models in tbx's roles: the agent, the simulated user, the rubric judge
solver.py   the benchmark's conversation, tbx's own loop with Inspect's models
scorer.py   the end-state scorer, its epoch reducer and metrics (bench.report.metrics)
task.py     the `thinkingbox_bench` task
"""
