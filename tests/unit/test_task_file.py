"""Task files: JSONL rows become Tasks; missing prompts fail with the row number."""

import json

import pytest

from agentrl.errors import InputError
from agentrl.tasks import load_task_file, task_source

pytestmark = pytest.mark.unit


def test_rows_become_tasks(tmp_path):
    path = tmp_path / "t.jsonl"
    rows = [{"prompt": "2+2?", "answer": 4, "tier": "easy"}, {"id": "x", "question": "Capital?", "split": "test"}]
    path.write_text("\n".join(json.dumps(r) for r in rows))
    tasks = load_task_file(path)
    assert [(t.id, t.prompt, t.answer, t.split) for t in tasks] == [
        ("t/0", "2+2?", "4", "train"),
        ("x", "Capital?", None, "test"),
    ]
    assert tasks[0].metadata == {"tier": "easy"}
    assert [t.id for t in task_source(path)("test")] == ["x"]


def test_missing_prompt_is_a_clear_error(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"prompt": "ok"}) + "\n" + json.dumps({"answer": "1"}))
    with pytest.raises(InputError, match=r"t\.jsonl:2 has no 'prompt'"):  # a JSON-lines row is named by its line
        load_task_file(path)
    with pytest.raises(InputError, match="missing.jsonl does not exist"):
        load_task_file(tmp_path / "missing.jsonl")
