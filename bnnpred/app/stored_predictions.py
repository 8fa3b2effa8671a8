"""A run's finished predictions, kept beside its checkpoints until the run's result is committed, so that a run
killed during a long evaluation (an nn predictive of 100 network samples over 20k images takes many minutes on a
CPU) keeps the (predictive, split) pairs it finished and computes only the rest when started again.

Files are checksummed (:func:`bnnpred.io.save_checked`) and named by the run key, so predictions of another config
or code version are never reused; one that does not verify is computed again.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch

from bnnpred.io import CorruptFile, load_checked, save_checked
from bnnpred.prediction import ClassPrediction, CountPrediction, Prediction, RegPrediction

log = logging.getLogger(__name__)

TYPES = {cls.__name__: cls for cls in (ClassPrediction, RegPrediction, CountPrediction)}


class StoredPredictions:
    """The predictions of the run with key ``key`` in ``folder`` (inactive when ``folder`` is None)."""

    def __init__(self, folder: Path | None, key: str):
        self.folder, self.key = folder, key

    def _path(self, kind: str, split: str) -> Path:
        return Path(self.folder) / f"predictive-{self.key[:16]}-{kind}-{split}.pt"

    def get(self, kind: str, split: str, device: torch.device) -> tuple[Prediction, float] | None:
        """The stored prediction (on ``device``) and the seconds it took, or None."""
        if self.folder is None:
            return None
        try:
            state = load_checked(self._path(kind, split))
        except FileNotFoundError:
            return None
        except (CorruptFile, OSError) as e:
            log.warning("stored %s predictions on %s ignored: %s", kind, split, e)
            return None
        log.info("predictive %s on %s: kept from an earlier, interrupted start", kind, split)
        fields = (f.to(device) if isinstance(f, torch.Tensor) else f for f in state["fields"])
        return TYPES[state["type"]](*fields), state["seconds"]

    def put(self, kind: str, split: str, prediction: Prediction, seconds: float) -> None:
        """Keep ``prediction``; one that cannot be written costs a warning, not the run."""
        if self.folder is None:
            return
        try:
            Path(self.folder).mkdir(parents=True, exist_ok=True)
            save_checked(self._path(kind, split), {"type": type(prediction).__name__, "fields": tuple(prediction),
                                                   "seconds": seconds})
        except OSError as e:
            log.warning("%s predictions on %s not kept (%s)", kind, split, e.strerror or e)
