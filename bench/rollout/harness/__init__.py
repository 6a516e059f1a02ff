"""Harness interventions: switchable changes to what the agent sees, measured
with `tbx compare` (docs/harness.md). Each is off by default; with none on,
the agent loop behaves exactly as without this package.

bench/harness_names.py (bench's lowest layer, for the models config): the
              intervention names; `parse_harness` turns the `harness:` of a
              models config or `--harness NAME[,NAME]` into the canonical tuple
              the manifest, the bundle hash and the attempt spec carry
hook.py       `tool_message`: what the model reads for a tool call's reply
error_hints.py  the `error-hints` categories
state_check.py  the `state-check` probe and message (the loop calls it when the agent ends)
approval.py   the `approval` hold: which calls wait for the user (the servers' marking,
              servers/engine/marking.py), the question, the refusal the model reads
              (the loop's side: `bench.rollout.agent_loop.call_tool`)
"""
