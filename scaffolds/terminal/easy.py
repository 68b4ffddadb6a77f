"""Easy terminal tasks: the prompt names the one command that solves them."""

from __future__ import annotations

from agentrl.scaffolds.terminal.spec import TerminalTask

_NOTES = "meeting at 10\nbring the slides\n"
_DRAFT = "# Plan\n\n- ship it\n"
_WORDS = "".join(f"word{i}\n" for i in range(37))

TASKS = [
    TerminalTask(
        "mkdir",
        "easy",
        "Create a directory named reports in the workspace (mkdir reports).",
        check="expect(os.path.isdir('reports') and not os.path.islink('reports'), 'reports/ is not a directory')",
        expert=("mkdir reports",),
        outputs=("reports",),
    ),
    TerminalTask(
        "hello",
        "easy",
        "Create the file hello.txt containing the line: hello world",
        check="expect(lines('hello.txt') == ['hello world'], 'hello.txt does not hold the line hello world')",
        expert=("echo 'hello world' > hello.txt",),
        outputs=("hello.txt",),
    ),
    TerminalTask(
        "copy",
        "easy",
        "Copy notes.txt to backup/notes.txt (mkdir -p backup && cp notes.txt backup/).",
        files={"notes.txt": _NOTES},
        check=f"expect(text('backup/notes.txt') == {_NOTES!r}, 'backup/notes.txt differs from notes.txt')\n"
        f"expect(text('notes.txt') == {_NOTES!r}, 'notes.txt changed')",
        expert=("mkdir -p backup && cp notes.txt backup/",),
        outputs=("backup/notes.txt",),
    ),
    TerminalTask(
        "rename",
        "easy",
        "Rename draft.md to final.md (mv draft.md final.md).",
        files={"draft.md": _DRAFT},
        check=f"expect(text('final.md') == {_DRAFT!r}, 'final.md does not hold the draft')\n"
        "expect(not os.path.exists('draft.md'), 'draft.md still exists')",
        expert=("mv draft.md final.md",),
        outputs=("final.md",),
        split="test",
    ),
    TerminalTask(
        "delete",
        "easy",
        "Delete the directory cache and everything in it (rm -r cache).",
        files={"cache/a.tmp": "a\n", "cache/deep/b.tmp": "b\n", "keep.txt": "keep me\n"},
        check="expect(not os.path.exists('cache'), 'cache still exists')\n"
        "expect(text('keep.txt') == 'keep me\\n', 'keep.txt was changed')",
        expert=("rm -r cache",),
        outputs=("keep.txt",),
    ),
    TerminalTask(
        "chmod",
        "easy",
        "Make the script run.sh executable (chmod +x run.sh).",
        files={"run.sh": "#!/bin/sh\necho started\n"},
        check="expect(os.path.isfile('run.sh') and os.access('run.sh', os.X_OK), 'run.sh is not executable')\n"
        "expect(run(['./run.sh']) == 'started\\n', 'run.sh no longer prints started')",
        expert=("chmod +x run.sh",),
        outputs=("run.sh",),
    ),
    TerminalTask(
        "count-lines",
        "easy",
        "Write the number of lines of words.txt into count.txt (wc -l < words.txt > count.txt).",
        files={"words.txt": _WORDS},
        check="expect(text('count.txt').strip() == '37', 'count.txt does not hold 37')",
        expert=("wc -l < words.txt > count.txt",),
        outputs=("count.txt",),
    ),
    TerminalTask(
        "append",
        "easy",
        "Append the line buy milk to the end of todo.txt (echo 'buy milk' >> todo.txt).",
        files={"todo.txt": "call mum\nwater plants\n"},
        check="expect(lines('todo.txt') == ['call mum', 'water plants', 'buy milk'], 'todo.txt is not as expected')",
        expert=("echo 'buy milk' >> todo.txt",),
        outputs=("todo.txt",),
        split="test",
    ),
]
