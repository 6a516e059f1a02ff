"""Which rubric judge style a run uses: the models config's `judge: {style: ...}`, the
manifest's `rubric_judge` key and the bundle it belongs to (results of two styles never
mix), and older manifests, which keep their bundle hash and read as the json style."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.llm.client import LLMClient
from bench.llm.config import ModelsConfigError, parse_models_config, rubric_style
from bench.llm.judge import rubric_judge
from bench.run import output
from bench.run.errors import BundleChanged

ROLE = {"base_url": "http://127.0.0.1:9/v1", "model": "m"}


def config(**judge: Any) -> Any:
    return parse_models_config({"agent": ROLE, "judge": {**ROLE, **judge}})


def test_the_judge_role_names_its_style_and_defaults_to_the_reference() -> None:
    assert config().judge.style == "reference"
    assert config(style="json").judge.style == "json"
    assert rubric_style(None) == rubric_style(config().agent) == "reference"
    # The style is the manifest's own key, not part of the role's public form.
    assert "style" not in config(style="json").public_dict()["judge"]
    with pytest.raises(ModelsConfigError, match=r"judge\.style"):
        config(style="legacy")
    with pytest.raises(ModelsConfigError, match=r"unknown key 'style' in agent"):  # a judge's setting only
        parse_models_config({"agent": {**ROLE, "style": "json"}})


def manifest(out: Path, models: Any) -> dict[str, Any]:
    bench = type("B", (), {"root": out, "release": None})()
    return output.write_manifest(
        out,
        bench,  # type: ignore[arg-type]
        agent="llm",
        repeats=1,
        run_name=None,
        images={"servers": "tbx/servers:x"},
        digests={"servers": "sha256:x"},
        config=models,
        data_hash="h",
    )


def test_the_manifest_records_the_style_and_a_change_is_another_bundle(tmp_path: Path) -> None:
    first = manifest(tmp_path, config())
    assert first["rubric_judge"] == "reference"
    assert json.loads((tmp_path / "manifest.json").read_text())["rubric_judge"] == "reference"
    (tmp_path / "none").mkdir()
    assert manifest(tmp_path / "none", None)["rubric_judge"] == "reference"  # no judge role: the default
    (tmp_path / "results.jsonl").write_text('{"task_id": "a", "repeat": 0}\n')
    with pytest.raises(BundleChanged) as change:
        manifest(tmp_path, config(style="json"))
    assert change.value.changed == ["rubric_judge"]
    assert first["bundle_hash"] != output.bundle_hash({**first, "rubric_judge": "json"})


def test_an_older_manifest_keeps_its_hash_and_reads_as_the_json_style(tmp_path: Path) -> None:
    old = {**dict.fromkeys(output.BUNDLE_KEYS, "x"), "harness": []}
    old_hash = output.bundle_hash(old)  # what tbx computed before the key existed
    assert old_hash == output.bundle_hash(old)
    assert output.manifest_rubric_style(old) == output.manifest_rubric_style(None) == "json"
    assert output.bundle_hash({**old, "rubric_judge": "json"}) != old_hash
    (tmp_path / "manifest.json").write_text(json.dumps({**old, "bundle_hash": old_hash}))
    # Regraded in its own style: left exactly as it was.
    output.set_rubric_style(tmp_path, "json")
    assert json.loads((tmp_path / "manifest.json").read_text()) == {**old, "bundle_hash": old_hash}
    # Every rubric asked again in the reference style: the key and the bundle hash change together.
    output.set_rubric_style(tmp_path, "reference")
    now = json.loads((tmp_path / "manifest.json").read_text())
    assert now["rubric_judge"] == "reference" and now["bundle_hash"] == output.bundle_hash(now) != old_hash
    # ...so a resume in the json style (the old one) is refused instead of mixing the two.
    (tmp_path / "results.jsonl").write_text('{"task_id": "a", "repeat": 0}\n')
    with pytest.raises(BundleChanged) as change:
        output.merge_previous_manifest(tmp_path, {**now, "rubric_judge": "json"})
    assert change.value.changed == ["rubric_judge"]


async def test_the_run_judge_asks_in_the_roles_style() -> None:
    """tbx run and tbx env serve build their judge from the role; regrade names the run's style."""
    for style in ("reference", "json"):
        async with LLMClient(config(style=style).judge, role="judge") as client:
            assert rubric_judge(client).style == style
            assert rubric_judge(client, "json").style == "json"
    async with LLMClient(config().agent, role="judge") as client:  # a plain role: the default
        assert rubric_judge(client).style == "reference"
