"""Publishing targets on the Hugging Face Hub (``hf://org/name``): upload a dataset tree, download one.

The tree is the one :func:`repo2env.publish.dataset.write_tree` writes for a folder target; here it
is written to a temporary folder and sent through ``huggingface_hub`` as ONE commit (or one pull
request). The commit is made with ``HfApi.create_commit`` rather than ``upload_folder``: with
``hf_xet`` installed (a dependency of huggingface_hub 2.x), ``upload_folder`` streams large folders
in several commits of at most 256 files and opens pull requests through a separate call, so a
dataset with its Harbor task folders would land in pieces; ``create_commit`` sends one commit with
every addition and deletion.

Every failure of the Hub reaches the user as one :class:`Repo2EnvError` line saying what to do.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from repo2env import __version__
from repo2env.errors import InputError, Repo2EnvError, SourceError
from repo2env.publish.dataset import PublishOptions, PublishSummary, TreeWriter, write_tree
from repo2env.runtime.backend import Backend

DEFAULT_ENDPOINT = "https://huggingface.co"
#: Files the Hub itself creates in every repository; they do not count as "other content".
HUB_OWN_FILES = frozenset({".gitattributes"})
# The Hub's rule for repository names (huggingface_hub.utils.validate_repo_id): letters, digits,
# "-", "_", "."; no "--" or ".."; not starting or ending with "-" or "."; 96 characters at most.
_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9_])?"
_REPO_ID = re.compile(rf"(?P<org>{_NAME})/(?P<name>{_NAME})")

@dataclass(frozen=True)
class HubTarget:
    """A dataset repository on the Hub."""

    repo_id: str

    def __str__(self) -> str:
        return f"hf://{self.repo_id}"


def parse_target(text: str) -> HubTarget | Path:
    """``hf://org/name`` (or ``hf://datasets/org/name``) -> a :class:`HubTarget`; anything else is a
    folder path. A malformed repository id is an InputError."""
    if not text.startswith("hf://"):
        return Path(text)
    repo_id = text.removeprefix("hf://").strip("/").removeprefix("datasets/")
    if not _REPO_ID.fullmatch(repo_id) or "--" in repo_id or ".." in repo_id or len(repo_id) > 96:
        raise InputError(f"{text}: not a Hub dataset repository",
                         hint="expected hf://org/name with letters, digits, '-', '_' or '.' in each part")
    return HubTarget(repo_id)


def hub_endpoint(endpoint: str | None = None) -> str:
    """The Hub to talk to: ``endpoint`` (``--hub-url``), else ``HF_ENDPOINT``, else the public Hub."""
    return (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def hub_token(token: str | None = None) -> str:
    """The token to write with: ``token``, else ``HF_TOKEN``, else the one ``hf auth login`` stored."""
    from huggingface_hub import get_token

    resolved = token or get_token()
    if not resolved:
        raise InputError("no Hugging Face token: publishing to the Hub needs a token with write access",
                         hint="pass --token, set HF_TOKEN, or run 'hf auth login'")
    return resolved


def publish_to_hub(folders: Sequence[Path], repo_id: str, options: PublishOptions, *, token: str | None = None,
                   endpoint: str | None = None, private: bool = False, revision: str | None = None,
                   create_pr: bool = False, overwrite: bool = False,
                   extra_writers: Sequence[TreeWriter] = (), images: Backend | None = None) -> PublishSummary:
    """Publish the dataset tree of ``folders`` to the dataset repository ``repo_id`` in one commit.

    The repository is created when missing (``private`` applies only then, as on the Hub; an
    existing public repository with ``private`` is refused). A ``revision`` is a branch, created
    from main when missing. ``create_pr`` opens a pull request against it (main by default) instead
    of committing to it. A branch that already holds files other than ``.gitattributes`` is refused
    unless ``overwrite`` (a branch created by this call counts as empty); the commit deletes the
    files the new tree does not have. ``summary.target`` is the URL of the commit or pull request.
    """
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete, HfApi

    parse_target(f"hf://{repo_id}")  # the same validation as the CLI's --to
    write_token = hub_token(token)
    url = hub_endpoint(endpoint)
    branch = revision or "main"
    api = HfApi(endpoint=url, token=write_token)
    with tempfile.TemporaryDirectory(prefix="repo2env-publish-") as staging:
        root = Path(staging) / "tree"
        # The tree first: a local mistake (nothing validated, bad task rows) never touches the Hub.
        summary = write_tree(folders, root, options, extra_writers=extra_writers, images=images)
        tree = sorted(path.relative_to(root).as_posix() for path in root.rglob("*") if path.is_file())
        with _hub_errors(url, repo_id):
            # Without --private the organization's default visibility applies, as on the Hub's own page.
            api.create_repo(repo_id, repo_type="dataset", private=True if private else None, exist_ok=True)
            if private and not api.repo_info(repo_id, repo_type="dataset").private:
                # The Hub ignores the flag for an existing repository: never publish in the open by surprise.
                raise InputError(f"hf://{repo_id} exists and is public, so --private cannot apply",
                                 hint="make the repository private on the Hub first, or drop --private")
            new_branch = branch != "main" and _create_branch(api, repo_id, branch)
            existing = [name for name in api.list_repo_files(repo_id, repo_type="dataset", revision=branch)
                        if name not in HUB_OWN_FILES]
            # A branch made just now holds main's files only because it starts there: replacing them
            # there overwrites nothing the user published on that branch.
            if existing and not overwrite and not new_branch:
                shown = ", ".join(existing[:3]) + (f" and {len(existing) - 3} more" if len(existing) > 3 else "")
                raise InputError(f"hf://{repo_id} (branch {branch}) already holds {len(existing)} file(s): {shown}",
                                 hint="pass --overwrite to replace them, or choose another repository or --revision")
            operations = [CommitOperationAdd(path_in_repo=name, path_or_fileobj=root / name) for name in tree]
            operations += [CommitOperationDelete(path_in_repo=name) for name in existing if name not in tree]
            commit = api.create_commit(
                repo_id, repo_type="dataset", operations=operations, revision=branch, create_pr=create_pr,
                commit_message=f"Publish {summary.rows} RL environments ({options.name})",
                commit_description=f"Written by repo2env {__version__}: data/*.parquet, README.md (dataset card), "
                                   "manifest.json (sha256 of every file).")
    summary.target = commit.pr_url or commit.commit_url
    return summary


def _create_branch(api, repo_id: str, branch: str) -> bool:
    """Create ``branch`` from main; False when it exists already."""
    from huggingface_hub.errors import HfHubHTTPError

    try:
        api.create_branch(repo_id, repo_type="dataset", branch=branch)
    except HfHubHTTPError as exc:
        if exc.response is not None and exc.response.status_code == 409:
            return False
        raise
    return True


def download_from_hub(repo_id: str, dest: Path, *, token: str | None = None, endpoint: str | None = None,
                      revision: str | None = None) -> Path:
    """Download the published dataset repository ``repo_id`` (at ``revision``, default main) into
    ``dest``; returns ``dest``. A public repository needs no token."""
    from huggingface_hub import get_token, snapshot_download

    parse_target(f"hf://{repo_id}")
    url = hub_endpoint(endpoint)
    dest.mkdir(parents=True, exist_ok=True)
    with _hub_errors(url, repo_id):
        path = snapshot_download(repo_id, repo_type="dataset", revision=revision, local_dir=dest, endpoint=url,
                                 token=token or get_token() or False)
    return Path(path)


@contextmanager
def _hub_errors(endpoint: str, repo_id: str) -> Iterator[None]:
    """Turn what huggingface_hub raises into one-line Repo2EnvErrors that say what to do."""
    import httpx2
    from huggingface_hub.errors import (
        HfHubHTTPError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        yield
    except Repo2EnvError:
        raise
    except RevisionNotFoundError:
        raise InputError(f"hf://{repo_id}: no such revision", hint="check --revision") from None
    except RepositoryNotFoundError:
        raise SourceError(f"hf://{repo_id}: no such dataset repository, or the token cannot read it",
                          hint="check the name and the token's access") from None
    except HfHubHTTPError as exc:
        raise _http_error(exc, endpoint, repo_id) from None
    except LocalEntryNotFoundError as exc:
        # snapshot_download falls back to the local cache when the Hub does not answer
        raise SourceError(f"the Hub at {endpoint} does not answer and hf://{repo_id} is not cached ({exc})",
                          hint="check the network, --hub-url or HF_ENDPOINT") from None
    except httpx2.TransportError as exc:
        raise SourceError(f"the Hub at {endpoint} does not answer ({type(exc).__name__})",
                          hint="check the network, --hub-url or HF_ENDPOINT") from None
    except ValueError as exc:
        if "metadata in README.md" in str(exc):  # the Hub's validate-yaml refused the card
            raise SourceError(f"the Hub refused the dataset card: {' '.join(str(exc).split())}") from None
        raise


def _http_error(exc, endpoint: str, repo_id: str) -> Repo2EnvError:
    status = exc.response.status_code if exc.response is not None else None
    said = (exc.server_message or "").strip().splitlines()[0] if exc.server_message else ""
    detail = f" (the Hub said: {said})" if said else ""
    if status == 401:
        return SourceError(f"the Hub at {endpoint} refused the token{detail}",
                           hint="check --token / HF_TOKEN, or run 'hf auth login' again")
    if status == 403:
        return SourceError(f"the token may not write to hf://{repo_id}{detail}",
                           hint="use a token with write access to this organization")
    if status == 404:
        return SourceError(f"hf://{repo_id}: the organization or repository does not exist{detail}",
                           hint="check the name, or create the organization on the Hub first")
    return SourceError(f"the Hub at {endpoint} answered HTTP {status}{detail}", hint="try again later")
