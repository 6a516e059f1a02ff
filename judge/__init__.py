"""Reading an attempt's terminal state and judging it against the golden end state."""
