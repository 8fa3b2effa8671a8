"""Every experiment preset composes, passes the checks and trains one minimal step; every study is registered."""

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from bnnpred.app.compose import CONF_DIR, compose
from bnnpred.app.runner import train
from bnnpred.cli import main
from bnnpred.data.root import FILES, verify
from bnnpred.inference import METHODS
from bnnpred.reproduce import STUDIES, identities

IMAGES = ["dataset.n_train=50", "dataset.n_test=20"]
SMALLER = {"banana": ["dataset.n_train=200"], "mnist": IMAGES, "fashion_mnist": IMAGES}
PRESETS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))
# Two steps need not improve a fit's objective: keep_unhealthy keeps such a run (flagged), since this test checks
# that every preset runs through every stage, not its numbers.
MINIMAL = ["selection.delta_grid=[1.0]", "selection.sigma2_grid=null", "predictive.n_samples=2", "plot.enabled=false",
           "progress=false", "keep_unhealthy=true"]


def one_step(cfg) -> list[str]:
    """Overrides that cut the preset's training to 2 steps (1 epoch where it counts epochs): its method's budget."""
    budget = METHODS[cfg.inference.name][0].BUDGET
    return ([f"inference.{key}=2" for key in budget.steps]
            + [f"inference.{key}=1" for key in budget.epochs if OmegaConf.select(cfg.inference, key) is not None]
            + (["ood.n_test=10"] if cfg.ood is not None else [])
            + (["predictive.gp_subset_size=10"] if cfg.predictive.gp_subset_size is not None else []))


@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_runs_one_minimal_step(preset, tmp_path, data_root):
    base = compose([f"experiment={preset}"])
    if base.dataset.name in FILES and any(status != "ok" for _, status in verify(base.dataset.name, data_root)):
        pytest.skip(f"{preset} needs {base.dataset.name}, which is not in the data root (a GPU-scale preset)")
    cfg = compose([f"experiment={preset}", *MINIMAL, *one_step(base), *SMALLER.get(base.dataset.name, [])])
    document = train(cfg, tmp_path).document
    assert document["run"]["dataset"].startswith(cfg.dataset.name)
    assert (tmp_path / "metrics.json").is_file()


def test_every_study_module_is_registered_with_a_page_and_cost():
    modules = {p.stem for p in (Path(__file__).parents[1] / "bnnpred" / "reproduce").glob("*.py")} - {
        "__init__", "base", "budget", "claims", "checklist", "derived", "grids"}
    assert set(STUDIES) == modules
    assert all(s.title and s.cpu_cost for s in STUDIES.values())


def test_an_unknown_study_lists_the_valid_ones(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["reproduce", "tabel1"])
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip() == (
        f"error: unknown study 'tabel1'; valid choices: {', '.join(sorted(STUDIES))}")


def test_rebuilding_pages_without_runs_skips_them_with_a_reason(tmp_path, caplog, capsys, monkeypatch):
    """Every page made from runs is skipped; the identities page, measured without runs, is built (its checks left
    out here: they take seconds and have their own tests)."""
    monkeypatch.setattr(identities, "SECTIONS", ())
    main(["reproduce", "--report-only", "--runs", str(tmp_path / "runs"), "--out", str(tmp_path / "out")])
    toys = next(line for line in caplog.text.splitlines() if "page toys not rebuilt: " in line)
    assert f"the record {tmp_path / 'out' / 'toys' / 'runs' / 'cpu'}" in toys and "restore it with git checkout" in toys
    assert not (tmp_path / "out" / "toys" / "README.md").exists()
    index = (tmp_path / "out" / "README.md").read_text()
    assert index.count("| [") == 1 and "| [identities/](identities/README.md) |" in index
