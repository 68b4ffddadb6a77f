"""SWE task records, the bundled task set, patch parsing and the SWE-RL similarity."""

import io
import json
import tarfile

import pytest
from agentrl.scaffolds.swe import bundled, patches
from agentrl.scaffolds.swe.grading import test_files as graded_files
from agentrl.scaffolds.swe.instances import SweInstance, load_instances, repository_archive

pytestmark = pytest.mark.unit

GOLD = bundled.instances()[0].patch


def test_bundled_tasks_cover_three_tiers_in_both_splits():
    found = bundled.instances()
    assert len(found) >= 24
    assert len({i.instance_id for i in found}) == len(found)
    for tier in bundled.TIERS:
        splits = [i.split for i in found if i.tier == tier]
        assert splits.count("train") >= 4 and splits.count("test") >= 2, tier
    for i in found:
        assert i.fail_to_pass and i.pass_to_pass and i.visible_tests
        assert patches.parses(i.patch) and patches.parses(i.test_patch)
        # the hidden tests are not in the repository the agent sees
        assert not any(f.split("::")[0] in i.visible_tests for f in i.fail_to_pass)
        assert (bundled.REPOS / i.repo.split("/")[1]).is_dir()


def test_easy_statements_name_the_file():
    for i in bundled.instances():
        if i.tier == "easy":
            changed = [line[6:] for line in i.patch.splitlines() if line.startswith("+++ b/")]
            assert all(path in i.problem_statement for path in changed), i.instance_id


def test_swe_bench_records_with_json_string_test_lists(tmp_path):
    row = {
        "instance_id": "o__r-1",
        "repo": "o/r",
        "base_commit": "abc",
        "problem_statement": "it breaks",
        "patch": GOLD,
        "test_patch": "",
        "FAIL_TO_PASS": json.dumps(["tests/test_a.py::test_x"]),
        "PASS_TO_PASS": "[]",
        "version": "1.0",
    }
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(row) + "\n")
    (instance,) = load_instances(path)
    assert instance.fail_to_pass == ("tests/test_a.py::test_x",) and instance.pass_to_pass == ()
    task = instance.to_task(tmp_path)
    assert task.id == "o__r-1" and task.prompt == "it breaks" and task.split == "test"
    assert SweInstance.from_task(task) == instance
    with pytest.raises(ValueError, match="base_commit"):
        SweInstance.from_record({k: v for k, v in row.items() if k != "base_commit"})


def test_tarball_repositories_lose_their_top_directory_and_git(tmp_path):
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for name, data in [("r-1.0/pkg/a.py", b"x = 1\n"), ("r-1.0/.git/HEAD", b"ref\n")]:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    (tmp_path / "o__r.tar.gz").write_bytes(buffer.getvalue())
    instance = SweInstance("o__r-1", "o/r", "abc", "s", "", "", ("t",))
    with tarfile.open(fileobj=io.BytesIO(repository_archive(instance, tmp_path))) as tar:
        assert tar.getnames() == ["pkg/a.py"]
    with pytest.raises(FileNotFoundError, match="nothing is downloaded"):
        repository_archive(SweInstance("x-1", "o/x", "abc", "s", "", "", ("t",)), tmp_path)


def test_graded_files_include_test_patch_targets_and_test_ids():
    instance = bundled.instances()[0]
    files = graded_files(instance)
    assert set(instance.visible_tests) <= set(files)
    assert {t.split("::")[0] for t in instance.fail_to_pass} <= set(files)


def test_patch_parsing():
    assert patches.parses(GOLD)
    assert not patches.parses("")
    assert not patches.parses("just some text\n")
    broken = "\n".join(GOLD.splitlines()[:-1])  # the hunk is a line short of what its header says
    assert not patches.parses(broken)
    assert patches.changed_lines(GOLD) == 2


def test_swe_rl_similarity():
    assert patches.similarity(GOLD, GOLD) == 1.0
    assert patches.similarity("", GOLD) == 0.0
    assert patches.similarity("not a diff", GOLD) == -1.0
    other = bundled.instances()[-1].patch
    assert 0.0 < patches.similarity(other, GOLD) < 0.8
    # blob hashes differ for any different result: they do not count
    rehashed = "\n".join("index 0000000..1111111 100644" if x.startswith("index ") else x for x in GOLD.splitlines())
    assert patches.similarity(rehashed, GOLD) == 1.0
