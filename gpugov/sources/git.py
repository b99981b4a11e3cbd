"""Declaration files at a git revision, read with git itself: no checkout, no work-tree change."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

from gpugov.declarations.loader import DECLARATION_DIRS, SourceFile, is_declaration_path


class GitError(Exception):
    """git is missing, the folder is no repository, or the revision does not exist."""


def _git(repo: Path, *args: str, data: bytes | None = None) -> bytes:
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], input=data, capture_output=True, check=False)
    except FileNotFoundError as exc:
        raise GitError("git is not installed") from exc
    if proc.returncode != 0:
        message = proc.stderr.decode(errors="replace").strip().splitlines()
        raise GitError(message[-1] if message else f"git {args[0]} failed")
    return proc.stdout


def resolve(repo: Path, ref: str) -> str:
    """The commit id of `ref` (a branch, tag, origin/main, HEAD~1, ...)."""
    return _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}").decode().strip() or _unknown(ref)


def _unknown(ref: str) -> str:
    raise GitError(f"unknown revision '{ref}'")


def revision_files(repo: Path, ref: str) -> list[SourceFile]:
    """The declaration files of `ref`, contents read in one `git cat-file --batch` call."""
    try:
        commit = resolve(repo, ref)
    except GitError as exc:
        raise GitError(f"unknown revision '{ref}' in {repo}") from exc
    prefix = _git(repo, "rev-parse", "--show-prefix").decode().strip()
    listing = _git(repo, "ls-tree", "-r", "-l", "-z", "--full-tree", commit, "--",
                   *(f"{prefix}{d}" for d in DECLARATION_DIRS))
    entries: list[tuple[str, str, int]] = []
    for record in listing.split(b"\0"):
        if not record:
            continue
        meta, path = record.decode().split("\t", 1)
        _mode, kind, blob, size = meta.split()
        rel = path[len(prefix):] if prefix and path.startswith(prefix) else path
        if kind == "blob" and is_declaration_path(rel):
            entries.append((rel, blob, int(size)))
    entries.sort()
    contents = _cat_blobs(repo, [blob for _, blob, _ in entries])
    return [SourceFile(rel, size, _reader(contents[blob])) for rel, blob, size in entries]


def _reader(data: bytes) -> Callable[[], bytes]:
    return lambda: data


def _cat_blobs(repo: Path, blobs: list[str]) -> dict[str, bytes]:
    if not blobs:
        return {}
    out = _git(repo, "cat-file", "--batch", data=("\n".join(blobs) + "\n").encode())
    contents: dict[str, bytes] = {}
    position = 0
    for blob in blobs:
        header_end = out.index(b"\n", position)
        _sha, _kind, size = out[position:header_end].decode().split()
        start = header_end + 1
        contents[blob] = out[start : start + int(size)]
        position = start + int(size) + 1
    return contents


def changed_paths(repo: Path, base: str, head: str | None = None) -> list[str]:
    """The files that differ between `base` and `head` (None: the working tree, untracked files
    included), relative to `repo`; a file outside `repo`'s folder is written ':/path' (from the top)."""
    prefix = _git(repo, "rev-parse", "--show-prefix").decode().strip()
    revisions = [resolve(repo, base)] + ([resolve(repo, head)] if head else [])
    listed = _git(repo, "diff", "--name-only", "--no-renames", "--no-relative", "-z", *revisions, "--").split(b"\0")
    if head is None:
        listed += _git(repo, "ls-files", "--others", "--exclude-standard", "--full-name", "-z", ":/").split(b"\0")
    paths = set()
    for raw in filter(None, listed):
        path = raw.decode(errors="replace")
        paths.add(path[len(prefix):] if path.startswith(prefix) else f":/{path}")
    return sorted(paths)


def file_at(repo: Path, ref: str, rel: str) -> bytes | None:
    """The content of `rel` (relative to `repo`) at `ref`, read from git; None where `ref` has no such file."""
    commit = resolve(repo, ref)
    prefix = _git(repo, "rev-parse", "--show-prefix").decode().strip()
    listing = _git(repo, "ls-tree", "-z", "--full-tree", commit, "--", f"{prefix}{rel}").split(b"\0")
    for record in filter(None, listing):
        meta, _path = record.decode().split("\t", 1)
        _mode, kind, blob = meta.split()
        if kind == "blob":
            return _cat_blobs(repo, [blob])[blob]
    return None
