"""Where the data files live, which files each dataset needs, and how to check and fetch them.

A data root is a folder laid out like the shared data folder (``<root>/snelson/snelson.npz``,
``<root>/banana/banana.csv``). Every file is pinned by its sha256, so a loader never reads a file that
differs from the one the results were produced with.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from bnnpred.errors import BnnpredError, unknown_choice

ENV_VAR = "BNNPRED_DATA_DIR"
DOWNLOAD_TIMEOUT_S = 60
_CHUNK = 1 << 20


@dataclass(frozen=True)
class RemoteFile:
    """One data file: ``path`` relative to the data root, its sha256 and a canonical download URL."""

    path: str
    sha256: str
    url: str


def _github_raw(repo: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


_SNELSON_COMMIT = "3597cf45a0c2496dd9e053090b3786f9fae573bb"  # ratschlab/bnn_priors, MIT
_BANANA_COMMIT = "fe80c2c4c53081a418a630f2fa7d49e8b4c1b543"  # aleximmer/BNN-predictions

FILES: dict[str, list[RemoteFile]] = {
    "snelson": [
        RemoteFile(
            "snelson/snelson.npz",
            "a69567989085582b55234da129a8f7225a753e344255723142f8278a1eb82e75",
            _github_raw("ratschlab/bnn_priors", _SNELSON_COMMIT, "bnn_priors/data/snelson.npz"),
        )
    ],
    "banana": [
        RemoteFile(
            "banana/banana.csv",
            "4fb6e6ac8748456ab078a7eef75373ba682470722b0c90f2dc907985c0f855f3",
            _github_raw("aleximmer/BNN-predictions", _BANANA_COMMIT, "data/banana/banana.csv"),
        )
    ],
}

# sha256 of files already hashed in this process, keyed by (absolute path, size, mtime_ns).
_DIGESTS: dict[tuple[str, int, int], str] = {}


def data_root(configured: str | None) -> Path:
    """The data root: ``configured`` if given, else the ``BNNPRED_DATA_DIR`` environment variable.

    Raises:
        BnnpredError: if neither is set.
    """
    chosen = configured or os.environ.get(ENV_VAR)
    if not chosen:
        raise BnnpredError(
            f"no data root: set {ENV_VAR} or dataset.root=PATH (bnnpred data fetch NAME downloads into it)"
        )
    return Path(chosen).expanduser()


def _remote_file(name: str, rel_path: str) -> RemoteFile:
    if name not in FILES:
        raise unknown_choice("dataset with data files", name, FILES)
    for remote in FILES[name]:
        if remote.path == rel_path:
            return remote
    raise BnnpredError(f"'{rel_path}' is not a registered file of dataset '{name}'")


def _sha256(path: Path) -> str:
    """sha256 of ``path``, hashed at most once per (path, size, mtime) in this process."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _DIGESTS:
        digest = hashlib.sha256()
        with path.open("rb") as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
        _DIGESTS[key] = digest.hexdigest()
    return _DIGESTS[key]


def _status(path: Path, sha256: str) -> str:
    if not path.is_file():
        return "missing"
    return "ok" if _sha256(path) == sha256 else "corrupt"


def require_file(root: Path, name: str, rel_path: str) -> Path:
    """The verified path ``root / rel_path`` of a registered file of dataset ``name``.

    Raises:
        BnnpredError: if the file is missing or its sha256 differs from the registry, naming the fix.
    """
    remote = _remote_file(name, rel_path)
    path = Path(root) / remote.path
    status = _status(path, remote.sha256)
    if status == "missing":
        raise BnnpredError(f"missing data file {path}; run: bnnpred data fetch {name} (or set {ENV_VAR})")
    if status == "corrupt":
        raise BnnpredError(
            f"corrupt data file {path} (sha256 mismatch); run: bnnpred data fetch {name} --force"
        )
    return path


def verify(name: str, root: Path) -> list[tuple[str, str]]:
    """``(path relative to root, status)`` for every file of ``name``; status is ok, missing or corrupt."""
    if name not in FILES:
        raise unknown_choice("dataset to verify", name, FILES)
    return [(remote.path, _status(Path(root) / remote.path, remote.sha256)) for remote in FILES[name]]


def _download_verified(remote: RemoteFile, target: Path) -> None:
    """Stream ``remote.url`` into a temp file next to ``target``, check its sha256, then rename atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(remote.url, timeout=DOWNLOAD_TIMEOUT_S) as response:
                    while chunk := response.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            except urllib.error.URLError as e:
                raise BnnpredError(f"could not download {remote.url}: {e.reason}") from e
            except (OSError, http.client.HTTPException) as e:
                raise BnnpredError(f"could not download {remote.url}: {e}") from e
        if digest.hexdigest() != remote.sha256:
            raise BnnpredError(
                f"downloaded {remote.url} has sha256 {digest.hexdigest()}, expected {remote.sha256}; "
                "retry, or copy the file into the data root by hand"
            )
        tmp.chmod(0o644)
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def fetch(name: str, root: Path, force: bool = False) -> list[Path]:
    """Download the files of dataset ``name`` into ``root``, verifying each sha256.

    Files already present and valid are kept unless ``force``. Each file is written to a temp file in its
    target folder and renamed into place only after its checksum matched, so a failed download never
    leaves a partial or wrong file behind.

    Returns:
        The paths of all files of ``name`` under ``root``.

    Raises:
        BnnpredError: for an unknown name, a network failure or a checksum mismatch.
    """
    if name not in FILES:
        raise unknown_choice("dataset to fetch", name, FILES)
    paths = []
    for remote in FILES[name]:
        target = Path(root) / remote.path
        if force or _status(target, remote.sha256) != "ok":
            _download_verified(remote, target)
        paths.append(target)
    return paths
