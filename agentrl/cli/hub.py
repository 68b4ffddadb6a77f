"""`agentrl push CKPT REPO_ID`: upload a checkpoint's model folder to the Hugging Face Hub.

CKPT is a run directory (its latest checkpoint), a checkpoint directory (`checkpoints/step_…`) or a model folder (a
`config.json`, or a LoRA `adapter_config.json`, as `agentrl sft --output` writes). What goes up is the folder
`from_pretrained` loads (weights, config, generation config, tokenizer, chat template and the model card); never
the optimizer and RNG state beside it. The repository is created when missing, and a `--revision` branch from
`main`. `HF_ENDPOINT` points at another Hub deployment.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

hub_app = typer.Typer()


@hub_app.command()
def push(
    checkpoint: Annotated[
        Path, typer.Argument(help="A run directory (its latest checkpoint), a checkpoint directory or a model folder.")
    ],
    repo_id: Annotated[str, typer.Argument(help="Hub repository, `user/name` or `org/name`; created when missing.")],
    private: Annotated[bool, typer.Option("--private", help="Create the repository private.")] = False,
    revision: Annotated[str | None, typer.Option(help="Branch to push to (made from main when missing).")] = None,
    token: Annotated[
        str | None, typer.Option(help="Hub token with write access (default: $HF_TOKEN, then `hf auth login`'s).")
    ] = None,
) -> None:
    """Upload a checkpoint's model folder (weights, config, tokenizer, model card) to the Hugging Face Hub."""
    folder = model_folder(checkpoint)
    commit = push_folder(folder, repo_id, private=private, revision=revision, token=token)
    typer.echo(f"pushed {folder} to {commit.repo_url} ({revision or 'main'}, commit {commit.oid[:12]})")


def model_folder(path: Path) -> Path:
    """The folder `from_pretrained` loads, found from a run directory, a checkpoint directory or the folder itself."""
    from agentrl.errors import InputError
    from agentrl.train.checkpoint import latest_checkpoint

    if not path.is_dir():
        raise InputError(f"{path} is not a directory (a run directory, a checkpoint or a model folder)")
    if (path / "checkpoints").is_dir():
        latest = latest_checkpoint(path)
        if latest is None:
            raise InputError(f"run directory {path} has no checkpoint yet")
        path = latest
    if _is_model_folder(path / "policy"):
        return path / "policy"
    if _is_model_folder(path):
        return path
    raise InputError(f"{path} holds no model: neither a run directory, a checkpoint, nor a folder with config.json")


def push_folder(
    folder: Path, repo_id: str, *, private: bool = False, revision: str | None = None, token: str | None = None
) -> Any:
    """Create `repo_id` (and `revision`) when missing and commit `folder` to it; returns the `CommitInfo`."""
    from huggingface_hub import HfApi
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled

    from agentrl import __version__
    from agentrl.errors import ConfigError, InfraError

    api = HfApi(token=token, library_name="agentrl", library_version=__version__)
    try:
        # private=None leaves the visibility to the Hub (public, or the organisation's default)
        api.create_repo(repo_id, private=True if private else None, exist_ok=True)
        if revision is not None and revision != "main":
            api.create_branch(repo_id, branch=revision, exist_ok=True)
        return api.upload_folder(
            repo_id=repo_id,
            folder_path=folder,
            revision=revision,
            commit_message=f"Upload {folder.parent.name if folder.name == 'policy' else folder.name} with agentrl",
        )
    except OfflineModeIsEnabled:
        raise ConfigError("HF_HUB_OFFLINE is set: unset it to push to the Hub") from None
    except HfHubHTTPError as e:
        status = e.response.status_code if e.response is not None else None
        if status in (401, 403):
            raise ConfigError(
                f"the Hub refused to let this token write to {repo_id} (HTTP {status}): pass --token with write "
                "access, or log in with `hf auth login`"
            ) from None
        raise InfraError(f"pushing to {repo_id} failed: {e}") from None
    except Exception as e:
        # the HTTP client's own errors (refused, timed out): httpx2, httpx or requests, by huggingface_hub version
        if type(e).__module__.partition(".")[0] not in ("httpx2", "httpx", "requests", "urllib3"):
            raise
        raise InfraError(f"could not reach the Hub at {api.endpoint}: {e}") from None


def _is_model_folder(path: Path) -> bool:
    return (path / "config.json").is_file() or (path / "adapter_config.json").is_file()
