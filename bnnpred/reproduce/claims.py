r"""Claims as data: one pass criterion of the notes' reproduction checklists (``../shared/papers/notes-00N.md``,
the "Reproduction checklist" section), evaluated on a study's numbers.

A criterion is written once, as an object that both renders its text and tests the numbers
(:class:`Compare`, :class:`Between`, :class:`Trend`); a claim ties it to the checklist item it answers and to
the numbers, and carries a verdict. Quantifiers over sets (:func:`every`, :func:`at_least`) never pass on an
empty set: no number gives ``not applicable`` with the reason. Pages render claims through
:func:`claims_table`; :func:`claims_json` is the same list as data, read by the checklist index.

Example:
    >>> c = claim(item(4, 10), Compare("glm NLL", "≤", "MAP NLL"), (0.31, 0.33))
    >>> c.text, c.verdict.value, c.numbers
    ('glm NLL ≤ MAP NLL', 'holds', '0.31 vs 0.33')
    >>> every(item(4, 6, "a"), Compare("glm NLL", "<", "bnn NLL"), {}, over="set").verdict.value
    'not applicable'
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from enum import Enum
from typing import Any, Protocol

import pandas as pd

from bnnpred.errors import BnnpredError


class Verdict(str, Enum):
    holds = "holds"
    fails = "does not hold"
    not_applicable = "not applicable"


@dataclass(frozen=True)
class Item:
    """A checklist item: ``notes-004 #6a`` is item 6, criterion (a), of ``notes-004.md``'s checklist."""

    notes: str
    number: int
    part: str = ""

    def __str__(self) -> str:
        return f"{self.notes} #{self.number}{self.part}"


def item(notes: int, number: int, part: str = "") -> Item:
    """``item(4, 6, "a")`` is ``notes-004 #6a``."""
    return Item(f"notes-{notes:03d}", number, part)


def fmt(value: object, digits: int = 4) -> str:
    """A number to ``digits`` significant digits (``nan`` as ``no number``), anything else as text."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return str(value)
    return "no number" if math.isnan(value) else f"{float(value):.{digits}g}"


def items(notes: int, *numbers: int) -> tuple[Item, ...]:
    """``items(1, 7, 8)`` is ``(notes-001 #7, notes-001 #8)``: the items a study answers."""
    return tuple(item(notes, n) for n in numbers)


OPS: dict[str, Callable[[float, float], bool]] = {"<": operator.lt, "≤": operator.le, ">": operator.gt,
                                                   "≥": operator.ge}


class Criterion(Protocol):
    """A pass criterion: its text, its test of one value, and the value as the numbers column shows it."""

    @property
    def text(self) -> str: ...

    def test(self, value: Any) -> bool: ...

    def show(self, value: Any) -> str: ...


@dataclass(frozen=True)
class Compare:
    """``left OP factor × right + margin``; ``right`` names a quantity (the value is a pair ``(left, right)``) or
    is a threshold (the value is ``left`` alone)."""

    left: str
    op: str
    right: str | float
    factor: float = 1.0
    margin: float = 0.0
    digits: int = 4

    def __post_init__(self) -> None:
        if self.op not in OPS:
            raise BnnpredError(f"Compare: unknown operator {self.op!r}; use one of {', '.join(OPS)}")

    @property
    def text(self) -> str:
        right = self.right if isinstance(self.right, str) else f"{self.right:g}".replace("-", "−")
        if self.factor != 1:
            right = f"{self.factor:g} × {right}"
        if self.margin:
            right += f" {'+' if self.margin > 0 else '−'} {abs(self.margin):g}"
        return f"{self.left} {self.op} {right}"

    def _pair(self, value: Any) -> tuple[float, float]:
        return (value[0], value[1]) if isinstance(self.right, str) else (value, self.right)

    def test(self, value: Any) -> bool:
        left, right = self._pair(value)
        return bool(OPS[self.op](left, self.factor * right + self.margin))

    def show(self, value: Any) -> str:
        left, right = self._pair(value)
        return f"{fmt(left, self.digits)} vs {fmt(right, self.digits)}" if isinstance(self.right, str) \
            else fmt(left, self.digits)


@dataclass(frozen=True)
class Between:
    """``quantity ∈ [low, high]``."""

    quantity: str
    low: float
    high: float
    digits: int = 4

    @property
    def text(self) -> str:
        return f"{self.quantity} ∈ [{self.low:g}, {self.high:g}]"

    def test(self, value: float) -> bool:
        return bool(self.low <= value <= self.high)

    def show(self, value: float) -> str:
        return fmt(value, self.digits)


TRENDS: dict[str, tuple[Callable[[float, float], bool], str]] = {
    "strictly falls": (operator.gt, " > "), "does not fall": (operator.le, " ≤ "),
    "strictly rises": (operator.lt, " < "), "does not rise": (operator.ge, " ≥ "),
}
RISING = ("strictly rises", "does not fall")  # the directions whose overall move is a rise


@dataclass(frozen=True)
class Trend:
    """``quantity`` moves one way over a sequence (``over`` names it), with at most ``allowed`` exceptions; the
    value is the sequence in that order. With ``net``, it must also move that way by more than ``net`` from its first
    value to its last: a sequence the variable had no effect on (constant, or flat within its noise or rounding),
    which "does not fall" or "does not rise" on ties, then does not pass.

    >>> Trend("train MSE", "does not fall", "δ", net=0.01).show([0.3, 0.3, 0.305])
    '0.3 ≤ 0.3 ≤ 0.305 (first to last +0.005)'
    """

    quantity: str
    direction: str
    over: str
    allowed: int = 0
    digits: int = 4
    net: float | None = None

    def __post_init__(self) -> None:
        if self.direction not in TRENDS:
            raise BnnpredError(f"Trend: unknown direction {self.direction!r}; use one of {', '.join(TRENDS)}")

    @property
    def text(self) -> str:
        exceptions = f" (≤ {self.allowed} exceptions)" if self.allowed else ""
        moved = "" if self.net is None else \
            f", {'rising' if self.direction in RISING else 'falling'} by > {self.net:g} from first to last"
        return f"{self.quantity} {self.direction} over {self.over}{exceptions}{moved}"

    def violations(self, value: Sequence[float]) -> int:
        step = TRENDS[self.direction][0]
        return sum(not step(a, b) for a, b in zip(value[:-1], value[1:], strict=True))

    def change(self, value: Sequence[float]) -> float:
        """The move from the first value to the last in the trend's direction (a rise, or a fall, as positive)."""
        return (value[-1] - value[0]) * (1 if self.direction in RISING else -1)

    def test(self, value: Sequence[float]) -> bool:
        return len(value) >= 2 and self.violations(value) <= self.allowed and (
            self.net is None or self.change(value) > self.net)

    def show(self, value: Sequence[float]) -> str:
        shown = TRENDS[self.direction][1].join(fmt(v, self.digits) for v in value)
        notes = [f"{self.violations(value)} exceptions"] * bool(self.allowed) + (
            [] if self.net is None or not value else [f"first to last {value[-1] - value[0]:+.{self.digits}g}"])
        return f"{shown} ({'; '.join(notes)})" if notes else shown


@dataclass(frozen=True)
class Ordered:
    """``quantity`` does not fall over a sequence (``over`` names it) but for at most ``allowed`` inversions: pairs of
    positions i < j whose values are out of order, every pair and not only neighbours, so that a last value that
    collapses below three earlier ones is three inversions (:class:`Trend` counts one exception); the value is the
    sequence in that order.

    >>> Ordered("ELBO", "multipliers", allowed=1).show([-0.64, -0.6, -0.56, -6.3])
    '-0.64 ≤ -0.6 ≤ -0.56 ≤ -6.3 (3 inversions)'
    """

    quantity: str
    over: str
    allowed: int = 0
    digits: int = 4

    @property
    def text(self) -> str:
        return f"{self.quantity} does not fall over {self.over} (≤ {_inversions(self.allowed)}: pairs out of order)"

    def inversions(self, value: Sequence[float]) -> int:
        return sum(a > b for i, a in enumerate(value) for b in value[i + 1:])

    def test(self, value: Sequence[float]) -> bool:
        return len(value) >= 2 and self.inversions(value) <= self.allowed

    def show(self, value: Sequence[float]) -> str:
        return f"{' ≤ '.join(fmt(v, self.digits) for v in value)} ({_inversions(self.inversions(value))})"


def _inversions(count: int) -> str:
    return f"{count} inversion{'' if count == 1 else 's'}"


@dataclass(frozen=True)
class AsWritten:
    """A departing claim's second verdict: the notes' criterion as written, its verdict, and why the page departs."""

    text: str
    verdict: Verdict
    why: str


@dataclass(frozen=True)
class Claim:
    """One row of a page's claims table: the checklist item, the criterion's text, the verdict and the numbers
    that decide it (or, for ``not applicable``, the reason); for a coded criterion that departs from the notes',
    the notes' own verdict beside it (``as_written``)."""

    item: Item
    text: str
    verdict: Verdict
    numbers: str
    as_written: AsWritten | None = None
    added: bool = False  # a criterion the page adds beside the notes' own (:func:`added`)

    def to_json(self) -> dict[str, Any]:
        document = {**asdict(self.item), "text": self.text, "verdict": self.verdict.value, "numbers": self.numbers}
        if self.as_written is not None:
            document["as_written"] = {"text": self.as_written.text, "verdict": self.as_written.verdict.value,
                                      "why": self.as_written.why}
        if self.added:
            document["added"] = True
        return document


def _label(criterion: Criterion, note: str) -> str:
    return f"{criterion.text} ({note})" if note else criterion.text


def _numbers(values: Any) -> list[float]:
    """Every number inside ``values`` (a number, or nested sequences of them)."""
    if isinstance(values, numbers.Real) and not isinstance(values, bool):
        return [float(values)]
    if isinstance(values, (tuple, list)):
        return [x for v in values for x in _numbers(v)]
    return []


def _missing(value: Any) -> bool:
    """A NaN, or a sequence of fewer than two values (nothing to compare)."""
    return any(math.isnan(x) for x in _numbers(value)) or (isinstance(value, (tuple, list)) and len(value) < 2)


def claim(item: Item, criterion: Criterion, value: Any, *, note: str = "", numbers: str = "") -> Claim:
    """``criterion`` tested on one ``value``; a missing number (NaN, an empty sequence) is ``not applicable``.
    ``numbers`` replaces the criterion's own rendering of the value."""
    text = _label(criterion, note)
    if _missing(value):
        shown = numbers or criterion.show(value)
        reason = shown if "no number" in shown else f"no number ({shown})" if shown else "no number"
        return Claim(item, text, Verdict.not_applicable, reason)
    verdict = Verdict.holds if criterion.test(value) else Verdict.fails
    return Claim(item, text, verdict, numbers or criterion.show(value))


def departs(coded: Claim, as_written: Claim, why: str) -> Claim:
    """``coded`` (the page's criterion: its verdict counts) carrying the notes' criterion as written, evaluated
    on the same numbers (``as_written``), and why the page departs from it; the page shows both verdicts.

    >>> c = departs(claim(item(4, 4), Compare("P", "<", 0.01), 0.004), claim(item(4, 4), Compare("P", "≤", 0.001),
    ...             0.004), "a CPU-scale tolerance")
    >>> c.verdict.value, c.as_written.verdict.value
    ('holds', 'does not hold')
    """
    if coded.item != as_written.item:
        raise BnnpredError(f"departs: the coded claim answers {coded.item}, the notes' criterion {as_written.item}")
    return replace(coded, as_written=AsWritten(as_written.text, as_written.verdict, why))


def added(c: Claim, why: str) -> Claim:
    """``c``, a criterion the page adds beside the notes' own for its item (``why`` says what it adds): the page shows
    it, and the checklist index (``outputs/checklist.md``) leaves it out of the item's verdict counts.

    >>> c = added(claim(item(4, 10), Compare("dampened bnn accuracy", "≥", "MAP accuracy"), (91.5, 91.8)), "§7")
    >>> c.text, c.to_json()["added"]
    ('dampened bnn accuracy ≥ MAP accuracy (added: §7)', True)
    """
    return replace(c, text=f"{c.text} (added: {why})", added=True)


def guarded(criterion: Claim, guard: Claim, why: str) -> Claim:
    """``criterion`` as the notes write it joined with ``guard``, a mechanism the notes leave implicit that a
    degenerate method fails (a posterior that never left the MAP, a curve that never moved); the page's verdict is
    the join's and the notes' criterion alone is carried beside it (:func:`departs`), with ``why``.

    >>> c = guarded(claim(item(3, 13), Compare("glm NLL", "≤", "MAP NLL"), (0.33, 0.33)),
    ...             claim(item(3, 13), Compare("|glm NLL − MAP NLL|", ">", 1e-3), 0.0), "a glm that never moved")
    >>> c.verdict.value, c.as_written.text, c.as_written.verdict.value
    ('does not hold', 'glm NLL ≤ MAP NLL', 'holds')
    """
    return departs(all_of(criterion, guard), criterion, why)


# "not MAP's copy": a posterior or GP that collapsed onto the MAP moves a predictive's test NLL by about its Monte Carlo
# noise (a GP at its prior factor grid's top, 1000: by its variance), far below this; 100 samples of one that moved
# change it by more
MOVED_NLL = 1e-3
NOT_MAP = "not MAP's copy: above a collapsed posterior's Monte Carlo noise"


def copy_passes(method: str) -> str:
    """Why a criterion joined with :func:`moved` departs from the notes' (the ``why`` of :func:`guarded`): the notes'
    criterion alone passes ``method`` as MAP's copy."""
    return (f"a {method} that never left the MAP passes the notes' criterion alone, on ties or on MAP's own numbers; "
            f"the page asks too that it is {NOT_MAP}")


def apart(method: str) -> Compare:
    """``method``'s test NLL differs from MAP's by more than :data:`MOVED_NLL` (the value: ``|NLL − NLL(MAP)|``)."""
    return Compare(f"|NLL({method}) − NLL(MAP)|", ">", MOVED_NLL)


def moved(it: Item, method: str, nll: float, map_nll: float) -> Claim:
    """The predictive ``method`` (the GLM or the GP) is not MAP's copy: its test NLL differs from MAP's by more than
    :data:`MOVED_NLL` (one that collapsed onto MAP passes every "≤", "≥ MAP − margin" or "within" criterion on ties)."""
    return claim(it, apart(method), abs(nll - map_nll), note=NOT_MAP)


LISTED = 8  # the numbers column lists each value of at most this many, else only failures


def _tested(criterion: Criterion, values: Mapping[str, Any]) -> tuple[list[str], list[str], str]:
    """The names that pass and that fail (the missing ones left out), and each name's numbers."""
    usable = {k: v for k, v in values.items() if not _missing(v)}
    passed = [k for k, v in usable.items() if criterion.test(v)]
    failed = [k for k in usable if k not in passed]
    if len(values) > LISTED:  # a long list: only the failures, the first few
        shown = [f"{k}: {criterion.show(values[k])}" for k in failed[:LISTED]] + ["..."] * (len(failed) > LISTED)
        return passed, failed, f"not: {', '.join(shown)}" if failed else "all"
    shown = ", ".join(f"{k}: {criterion.show(v) if k in usable else 'no number'}" for k, v in values.items())
    return passed, failed, shown


def every(item: Item, criterion: Criterion, values: Mapping[str, Any], *, over: str, note: str = "") -> Claim:
    """``criterion`` on every value of ``values`` (one per ``over``: a set, a method, ...); no value, or one
    without a number, is ``not applicable``."""
    text = _label(Labelled(criterion, f"on every {over}"), note)
    missing = [k for k, v in values.items() if _missing(v)]
    if not values or missing:
        listed = ", ".join(missing[:LISTED]) + (", ..." if len(missing) > LISTED else "")
        reason = f"no {over} to check" if not values else f"no number for {len(missing)}: {listed}"
        return Claim(item, text, Verdict.not_applicable, reason)
    passed, failed, shown = _tested(criterion, values)
    return Claim(item, text, Verdict.fails if failed else Verdict.holds, f"{len(passed)}/{len(values)}: {shown}")


def at_least(item: Item, criterion: Criterion, values: Mapping[str, Any], share: tuple[int, int], *, over: str,
             note: str = "") -> Claim:
    """``criterion`` on at least ``share`` (e.g. ``(6, 8)``: 6 of 8, scaled to the number of values) of
    ``values`` (``over``, plural: "sets"); a value without a number counts as one that does not pass (a set left
    out never lowers the bar); no value with a number is ``not applicable``."""
    text = _label(Labelled(criterion, f"on ≥ {share[0]}/{share[1]} of the {over}"), note)
    passed, failed, shown = _tested(criterion, values)
    if not passed and not failed:
        return Claim(item, text, Verdict.not_applicable, f"no {over} to check")
    missing = len(values) - len(passed) - len(failed)
    holds = len(passed) * share[1] >= share[0] * len(values)
    unnumbered = f" ({missing} without a number)" if missing else ""
    return Claim(item, text, Verdict.holds if holds else Verdict.fails,
                 f"{len(passed)}/{len(values)}{unnumbered}: {shown}")


@dataclass(frozen=True)
class Labelled:
    """A criterion with words added to its text (the quantifier of :func:`every` and :func:`at_least`)."""

    criterion: Criterion
    suffix: str

    @property
    def text(self) -> str:
        return f"{self.criterion.text} {self.suffix}"

    def test(self, value: Any) -> bool:
        return self.criterion.test(value)

    def show(self, value: Any) -> str:
        return self.criterion.show(value)


def _joined(name: str, claims: Sequence[Claim], word: str, order: tuple[Verdict, ...], note: str) -> Claim:
    """Claims of one item joined by ``word``: the first verdict of ``order`` that one of them has, else the last."""
    if len({c.item for c in claims}) != 1:
        raise BnnpredError(f"{name}: the claims answer several checklist items; give it claims of one item")
    if any(c.as_written is not None for c in claims):
        raise BnnpredError(f"{name}: a part departs from the notes; join the parts first, then mark the departure")
    if any(c.added for c in claims):
        raise BnnpredError(f"{name}: a part is added beside the notes' criteria; join the parts first, then mark it")
    verdicts = {c.verdict for c in claims}
    verdict = next((v for v in order if v in verdicts), order[-1])
    text = f" {word} ".join(f"({c.text})" if " and " in c.text or " or " in c.text else c.text for c in claims)
    return Claim(claims[0].item, f"{text} ({note})" if note else text, verdict, "; ".join(c.numbers for c in claims))


def all_of(*claims: Claim, note: str = "") -> Claim:
    """The conjunction of claims on one item: fails if one fails, else not applicable if one is, else holds."""
    return _joined("all_of", claims, "and", (Verdict.fails, Verdict.not_applicable, Verdict.holds), note)


def any_of(*claims: Claim, note: str = "") -> Claim:
    """The disjunction of claims on one item: holds if one holds, else fails if one fails, else not applicable."""
    return _joined("any_of", claims, "or", (Verdict.holds, Verdict.fails, Verdict.not_applicable), note)


def lookup(table: pd.DataFrame, row: Any, column: Any) -> float:
    """``table.loc[row, column]`` as a float; NaN (a missing number) when the table has no such cell."""
    if row in table.index and column in table.columns:
        return float(table.loc[row, column])
    return math.nan


def standardised(difference: float, se: float) -> float:
    """``difference / se``, the number of standard errors; ±inf for a nonzero difference at zero s.e., NaN (a
    missing number) when the s.e. is (one seed has none)."""
    if math.isnan(se) or math.isnan(difference):
        return math.nan
    if se > 0:
        return difference / se
    return math.copysign(math.inf, difference) if difference else 0.0


def ends(values: pd.Series) -> tuple[float, float]:
    """The last and the first value of a series (NaN for an empty one), for "at the end below the start"."""
    return (float(values.iloc[-1]), float(values.iloc[0])) if len(values) else (math.nan, math.nan)


def cell(text: str) -> str:
    """``text`` for a Markdown table cell: its ``|`` (absolute values) escaped."""
    return text.replace("|", "\\|")


def shown_text(c: Claim) -> str:
    """The claim's criterion, and where it departs from the notes, the notes' own criterion and its verdict."""
    if c.as_written is None:
        return c.text
    return (f"{c.text} — departs from the notes' {c.as_written.text}, which {_says(c.as_written.verdict)} "
            f"({c.as_written.why})")


def _says(verdict: Verdict) -> str:
    return {Verdict.holds: "holds", Verdict.fails: "does not hold", Verdict.not_applicable: "has no number"}[verdict]


def claims_table(claims: Sequence[Claim]) -> str:
    """The Markdown table a page shows its claims in, one row per claim."""
    rows = [f"| {c.item} | {cell(shown_text(c))} | {c.verdict.value} | {cell(c.numbers)} |" for c in claims]
    return "\n".join(["| checklist item | claim (pass criterion) | result | numbers |", "|---|---|---|---|", *rows])


def claims_json(claims: Sequence[Claim]) -> list[dict[str, Any]]:
    """The claims as data, for ``claims.json`` beside a page."""
    return [c.to_json() for c in claims]
