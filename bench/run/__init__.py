"""A run: the attempt unit, the coordinator that schedules attempts and writes results, golden end states, regrading."""
