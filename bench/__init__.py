"""What to run and how it scored: tasks, runner, conformance, metrics, CLI."""
