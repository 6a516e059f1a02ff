"""Typed, immutable views of ThinkingBox-Bench data (pydantic v2).

The models are frozen (attributes cannot be reassigned); the containers inside
them (dicts of rows, parameter dicts) are ordinary Python objects - treat them
as read-only. Every model that comes from a file keeps the file's mapping in
``raw`` so nothing the harness format allows is lost.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

CHECK_DATABASE = "validate_database"
CHECK_RUBRICS = "validate_rubrics_yesno"
CHECK_CUSTOM = "custom_python"
KNOWN_CHECKS = (CHECK_DATABASE, CHECK_RUBRICS, CHECK_CUSTOM)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ToolInteraction(_Frozen):
    """One golden tool call: ``{tool, parameters}``."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    tool: str | None = None
    parameters: dict[str, Any] = Field(default_factory=dict)


class PolicySource(_Frozen):
    """A policy document of a scenario (feeds the ``search_policy`` tool)."""

    name: str
    snippets: list[str] = Field(default_factory=list)


class ServerInit(_Frozen):
    """The init config of one server (``world_state.<server>`` / ``init.<server>``).

    ``golden_tool_interactions`` is ``golden_test_case.tool_interactions``;
    ``raw`` is the config mapping exactly as written or merged (the payload the
    harness hands to the server's ``__reserved__init``; it includes ``sources``).
    Nulls in the file become empty containers here.
    """

    data_patch: dict[str, list[dict[str, Any]]] = Field(default_factory=dict)
    golden_tool_interactions: list[ToolInteraction] = Field(default_factory=list)
    rubrics_yesno: list[str] = Field(default_factory=list)
    rubrics: list[Any] = Field(default_factory=list)
    sources: list[PolicySource] = Field(default_factory=list)
    raw: dict[str, Any] = Field(default_factory=dict, repr=False)

    @property
    def golden_tools(self) -> list[str]:
        return [t.tool for t in self.golden_tool_interactions if t.tool]


class ScenarioTool(_Frozen):
    """An entry of a scenario's ``tools`` allow-list, with the harness's client-side overrides."""

    name: str
    override_description: str | None = None
    override_arg_description: dict[str, str] | None = None
    direct_response: str | None = None
    is_end_turn: bool = False


class Scenario(_Frozen):
    """``dataset/scenario/<name>.yaml``.

    ``world_state`` is raw (server -> init config, possibly with nulls);
    ``sources`` holds the parsed policy documents per server.
    """

    name: str
    path: str
    world_state: dict[str, dict[str, Any]]
    tools: list[ScenarioTool]
    bot_instructions: str | None = None
    sources: dict[str, list[PolicySource]] = Field(default_factory=dict)
    tags: Any = None
    fixtures: dict[str, Any] = Field(default_factory=dict)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def servers(self) -> list[str]:
        return list(self.world_state)

    @property
    def tool_names(self) -> list[str]:
        return [t.name for t in self.tools]


class AgentPrompt(_Frozen):
    """``dataset/agent/<name>.yaml`` (e.g. ``think``)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    name: str
    path: str
    system_instructions: str
    builtin_tools: list[dict[str, Any]] = Field(default_factory=list)
    parallel_tool_calls: bool | None = None
    raw: dict[str, Any] = Field(default_factory=dict, repr=False)


class Task(_Frozen):
    """One test case. ``id`` is ``<file>:<uid>`` with ``file`` = ``<stem>.py``.

    ``init`` is the test's own per-server config (use ``effective_init`` for the
    merge with the scenario's world_state). ``max_*_sim_turns`` are ``None``
    when the test does not set them (harness defaults: 10 user turns,
    unlimited agent turns). ``source`` is the file's path relative to the root.
    ``runs_function``: graded by running ``test_code`` in the evaluator sandbox.
    """

    id: str
    file: str
    uid: str
    source: str
    scenario: str
    domain: str
    server: str | None = None
    query: str
    user_context: str | None = None
    init: dict[str, ServerInit] = Field(default_factory=dict)
    checks: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    max_user_sim_turns: int | None = None
    max_agent_sim_turns: int | None = None
    bot_instructions: str | None = None
    history: Any = None
    format_query: bool = False
    metadata: dict[str, Any] = Field(default_factory=dict)
    # The code string the reference runs for this test (pyfile.code_string); None for
    # a YAML test case without one.
    test_code: str | None = Field(default=None, repr=False)
    raw: dict[str, Any] = Field(default_factory=dict, repr=False)

    @property
    def runs_function(self) -> bool:
        """Graded by running its test function (its body holds more than the two calls
        the native judge stands in for), not by the native judge alone."""
        return self.test_code is not None and CHECK_CUSTOM in self.checks

    @property
    def golden(self) -> list[ToolInteraction]:
        """Golden tool calls of all servers, in server order then call order."""
        return [t for s in self.init.values() for t in s.golden_tool_interactions]

    @property
    def rubrics(self) -> list[str]:
        """The yes/no rubric questions of all servers (``init.<server>.rubrics_yesno``)."""
        return [r for s in self.init.values() for r in s.rubrics_yesno]

    @property
    def has_rubrics(self) -> bool:
        return CHECK_RUBRICS in self.checks


Layout = Literal["export", "checkout"]
