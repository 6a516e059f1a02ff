"""What to run and how it scored.

dataset/  benchmark loader (tasks, scenarios, seed rows)
rollout/  agent loop, simulated user, built-in agents, trajectory
run/      attempt unit, run coordinator, output files, golden end states, regrade
replay/   tool-call replay (over MCP, in-process) and conformance
llm/      model endpoint config and client
report/   metrics, markdown and HTML reports
cli/      the `tbx` command line, one module per command
"""

from bench.threadsafe_ast import install as _install_threadsafe_ast

_install_threadsafe_ast()
