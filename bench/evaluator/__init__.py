"""Test functions as the task files write them: the `TestContext` built from an
attempt (context), the judge questions relayed to the judge role (relay), and the
run in the evaluator sandbox turned into a verdict (functions)."""
