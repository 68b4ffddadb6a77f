"""`TerminalTask`: how one bundled shell task is written down, and how it becomes a `Task`."""

from __future__ import annotations

from dataclasses import dataclass, field

from agentrl.types import Task

TIERS = ("easy", "medium", "hard")


@dataclass(frozen=True)
class TerminalTask:
    """A goal, the workspace it starts from, a checker, and what a perfect agent would type."""

    slug: str
    """Short name, unique within the tier."""
    tier: str
    """`easy` (one command the prompt spells out), `medium` (one command to work out), `hard` (several steps)."""
    prompt: str
    """The goal as the model reads it."""
    check: str
    """Python run in /workspace after the episode (see `workspace.CHECK_PRELUDE` for its helpers); exit status 0
    means solved. It holds the expected values itself rather than recomputing them from workspace files the
    model could have edited."""
    expert: tuple[str, ...]
    """Bash commands, one per turn, that solve the task from its initial workspace."""
    files: dict[str, str] = field(default_factory=dict)
    """Workspace-relative path → text, written before the first turn."""
    setup: str = ""
    """Bash run in /workspace after the files are written (modes, links, generated files)."""
    outputs: tuple[str, ...] = ()
    """Paths the checker inspects; a test forges each with wrong content and expects the check to fail."""
    split: str = "train"
    """`train` or `test` (held out)."""
    names: tuple[str, ...] = ()
    """The names a generated task was filled with (a demonstration's miscopy mistake swaps one)."""

    def to_task(self) -> Task:
        metadata = {
            "tier": self.tier,
            "setup": {"files": dict(self.files), "commands": self.setup},
            "check": self.check,
            "expert": list(self.expert),
            "outputs": list(self.outputs),
        }
        if self.names:
            metadata["names"] = list(self.names)
        return Task(f"terminal/{self.tier}/{self.slug}", self.prompt, None, metadata, self.split, "terminal")
