"""OpenAI-compatible model endpoints: the three roles' config (agent, user, judge) and the client."""
