"""Running an agent against one sandbox: the agent loop, the simulated user, the built-in agents and the trajectory they leave."""
