"""A run's config as Hydra composes it, outside Hydra's own entry point: the config of a set of overrides, the jobs
of a sweep, the re-evaluation settings an ``eval`` call changes, and one job checked before anything is written; each
Hydra or OmegaConf error as one line that names the key and the valid choices."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

from omegaconf import DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from bnnpred.errors import BnnpredError

CONF_DIR = Path(__file__).resolve().parents[1] / "conf"  # shipped inside the package (wheels included)


def compose(overrides: list[str], with_hydra: bool = False, suggest: bool = True) -> DictConfig:
    """The config Hydra would build for these overrides (``hydra.*`` overrides are ignored here); resolved,
    or unresolved and with its ``hydra`` node when ``with_hydra``. An unknown key is one line naming the keys it
    could have meant (``suggest``: composed once more without it)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.core.global_hydra import GlobalHydra

    from bnnpred.app.config import register_configs

    register_configs()
    GlobalHydra.instance().clear()
    own = [o for o in overrides if not o.lstrip("+~").startswith(("hydra.", "hydra/"))]
    refuse_unknown_additions(own)
    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
            cfg = hydra_compose(config_name="config", overrides=own, return_hydra_config=with_hydra)
        if not with_hydra:
            OmegaConf.resolve(cfg)
        return cfg
    except Exception as e:  # Hydra and OmegaConf raise many types; all become one line
        message = one_line(e)
        unknown = re.match(r"(\S+): Key '[^']+' not in", message)
        raise BnnpredError(message + (nearest_keys(own, unknown.group(1)) if unknown and suggest else "")) from e
    finally:
        GlobalHydra.instance().clear()


def refuse_unknown_additions(overrides: list[str]) -> None:
    """``+key=value`` adds a key no schema knows, which no code would read: refused (``+group=option`` selects a
    config of a group and stays allowed)."""
    for override in overrides:
        if override.startswith("+") and not override.startswith("++"):
            key = override.lstrip("+").split("=", 1)[0]
            if not (CONF_DIR / key).is_dir():
                raise BnnpredError(f"+{key} adds a key that no part of bnnpred reads; drop the '+' to set an existing "
                                   f"key (bnnpred train --cfg job lists them)")


def one_line(e: BaseException) -> str:
    """A Hydra / OmegaConf error as one line: unknown options list the valid ones, keys are named."""
    from hydra.errors import MissingConfigException

    cause = e
    while isinstance(cause, MissingConfigException) is False and cause.__cause__ is not None:
        cause = cause.__cause__
    if isinstance(cause, MissingConfigException) and cause.missing_cfg_file:
        group, _, name = cause.missing_cfg_file.rpartition("/")
        if cause.options:
            return f"unknown {group or 'config'} '{name}'; valid choices: {', '.join(sorted(cause.options))}"
    deepest = e
    while deepest.__cause__ is not None:  # Hydra's "Could not override" wraps OmegaConf's reason
        deepest = deepest.__cause__
    lines = [ln.strip() for ln in str(deepest).splitlines() if ln.strip()]
    keep = [ln for ln in lines if not ln.startswith(("object_type=", "reference_type=", "Set the environment",
                                                      "To append", "full_key:"))]
    full_key = next((ln.split(":", 1)[1].strip() for ln in lines if ln.startswith("full_key:")), None)
    text = "; ".join(dict.fromkeys(keep)) or type(deepest).__name__
    return f"{full_key}: {text}" if full_key and full_key not in text else text


def nearest_keys(overrides: list[str], full_key: str) -> str:
    """``; did you mean prior.delta? (keys of prior: delta, scale, bias_delta)`` for an unknown ``full_key``, from
    the config composed without the overrides that name it or a key under it."""
    import difflib

    parent, _, name = full_key.rpartition(".")
    rest = [o for o in overrides if not f"{o.lstrip('+~').split('=', 1)[0]}.".startswith(f"{full_key}.")]
    try:
        node = compose(rest, suggest=False)
        keys = list(OmegaConf.select(node, parent) if parent else node)
    except Exception:  # the rest does not compose either: no suggestion
        return ""
    close = difflib.get_close_matches(name, keys, n=2)
    guess = f"; did you mean {' or '.join(f'{parent}.{k}' if parent else k for k in close)}?" if close else ""
    return f"{guess} (keys of {parent or 'the root'}: {', '.join(keys)})"


def base_overrides(overrides: list[str]) -> list[str]:
    """The overrides that are not sweeps (Hydra composes a sweep's base config from them); one line on bad syntax."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        return [o.input_line for o in OverridesParser.create().parse_overrides(overrides) if not o.is_sweep_override()]
    except Exception as e:
        raise BnnpredError(one_line(e)) from e


def expand_sweep(overrides: list[str]) -> list[list[str]]:
    """Every job's override list for a ``-m`` call with Hydra's basic sweeper: the cartesian product of the sweep
    values in the config's ``hydra.sweeper.params`` (experiment presets) and on the command line (a key given twice:
    the command line wins), as the basic sweeper builds it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    try:
        params = compose(base_overrides(overrides), with_hydra=True).hydra.sweeper.get("params") or {}
        parsed = OverridesParser.create().parse_overrides([*(f"{k}={v}" for k, v in params.items()), *overrides])
    except BnnpredError:
        raise
    except Exception as e:
        raise BnnpredError(one_line(e)) from e
    values: dict[str, list[str]] = {}
    for override in parsed:
        key = override.get_key_element()
        try:
            choices = (list(override.sweep_string_iterator()) if override.is_sweep_override()
                       else [override.get_value_element_as_str()])
        except Exception as e:  # interval(), tag() ... : values that a sampling sweeper draws
            raise BnnpredError(f"{override.input_line}: the basic sweeper takes lists and ranges (a,b,c or range(..)); "
                               "to sample intervals use a sampling sweeper, e.g. hydra/sweeper=optuna") from e
        values[key] = [f"{key}={value}" for value in choices]
    return [list(job) for job in itertools.product(*values.values())]


def check_job(overrides: list[str]) -> None:
    """Compose, type and value-check one job and make sure its data can be read."""
    from bnnpred.app.run_checks import check_applicable, check_config, check_network
    from bnnpred.app.run_setup import typed
    from bnnpred.data import load_dataset

    cfg = compose(overrides)
    try:
        typed_cfg = typed(cfg)
    except OmegaConfBaseException as e:
        raise BnnpredError(one_line(e)) from e
    check_config(typed_cfg)
    data = load_dataset(typed_cfg.dataset)
    check_applicable(typed_cfg, overrides, data)
    check_network(typed_cfg, data)


def predictive_overrides(overrides: list[str]) -> DictConfig:
    """The ``predictive`` / ``plot`` (and display) settings an ``eval`` call changes, as a partial config."""
    allowed = ("predictive", "plot", "device", "progress", "threads")
    bad = [o for o in overrides if o.split("=", 1)[0].split(".", 1)[0].split("/")[0] not in allowed]
    if bad:
        raise BnnpredError(f"eval only changes predictive, plot, device, progress and threads settings, not: "
                           f"{' '.join(bad)}")
    group = [o for o in overrides if o.startswith("predictive=")]
    partial = OmegaConf.create({})
    if group:
        partial.predictive = compose(group).predictive
    dotted = [o for o in overrides if "." in o.split("=", 1)[0] or o.startswith(("device=", "progress=", "threads="))]
    try:
        return OmegaConf.merge(partial, OmegaConf.from_dotlist(dotted))
    except OmegaConfBaseException as e:
        raise BnnpredError(one_line(e)) from e
