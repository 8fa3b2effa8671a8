"""The first thesis's studies' claims (notes-000 items 11-13, 15, 17, 19, 20) and the banana table's (notes-003
items 8, 9) on small synthetic frames, including empty ones."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch
from helpers import answered, declared, verdicts

from bnnpred.inference.map_finish import sum_neg_log_joint
from bnnpred.reproduce import thesis_fig5_6, thesis_predictives, toys
from tests.helpers import tiny_problem

NA = "not applicable"


def test_importance_claims():
    claims = thesis_fig5_6.importance_claims(1.0, 0.31, 20, 20, 2e-4, 1e-6, 1e-14)
    # max |a| 0.31 > 0.2, but training is perfect and 0.31 < 0.5
    assert verdicts(claims) == ["holds"] * 5
    assert claims[1].text == "max |a_i| ≤ 0.2 or (training accuracy ≥ 1 and max |a_i| < 0.5)"
    imperfect = thesis_fig5_6.importance_claims(0.999, 0.31, 19, 20, 2e-3, 1e-2, 3e-6)
    assert verdicts(imperfect) == ["holds", "does not hold", "does not hold", "does not hold", "does not hold"]
    assert imperfect[3].numbers == "2.00e-03 at gradient norm 0.01"
    assert imperfect[4].numbers == "3.00e-06"
    assert answered(claims) == declared("thesis_fig5_6")


def predictive_table(**changes: float) -> pd.DataFrame:
    """Test metrics per (method, predictive): GLM fits everywhere, NN fails for L-GGN and OGGN."""
    rows = {}
    for method, nn_nll in (("L-GGN", 3.0), ("OGGN", 1.2), ("LGVA", 0.5), ("VOGGN", 0.36)):
        rows[(method, "glm")] = {"nll": 0.31, "rmse": 0.31, "accuracy": 0.9, "pred_std": 0.3}
        rows[(method, "nn")] = {"nll": nn_nll, "rmse": 0.5, "accuracy": 0.89, "pred_std": 1.0}
    table = pd.DataFrame.from_dict(rows, orient="index")
    for key, value in changes.items():
        method, kind, column = key.split("__")
        table.loc[(method.replace("_", "-"), kind), column] = value
    return table


def test_snelson_and_moons_claims():
    t = predictive_table()
    failed, learned = thesis_predictives.learned_claim(t, "thesis_fig5_4")
    assert (failed, learned.verdict.value) == ([], "holds")
    snelson = thesis_predictives.snelson_claims(t)
    # (b) holds for L-GGN (gap 2.69) and OGGN (0.89); (c) 0.05; (d) LGVA gap 0.19 ≤ L-GGN's + 0.1
    assert verdicts(snelson) == ["holds"] * 5
    moons = thesis_predictives.moons_claims(t)
    assert verdicts(moons) == ["holds"] * 4
    lgva_lost = predictive_table(LGVA__glm__nll=1.99, LGVA__glm__rmse=0.7)
    failed, learned = thesis_predictives.learned_claim(lgva_lost, "thesis_fig5_4")
    assert (failed, learned.verdict.value) == (["LGVA"], "does not hold")
    assert verdicts(thesis_predictives.snelson_claims(lgva_lost))[0] == "does not hold"  # spread 1.68 > 0.2
    empty = t.iloc[:0]
    assert set(verdicts([*thesis_predictives.snelson_claims(empty), *thesis_predictives.moons_claims(empty),
                         thesis_predictives.learned_claim(empty, "thesis_fig5_5")[1]])) == {NA}
    blr = thesis_predictives.blr_claims(BLR_NUMBERS)
    assert answered([*snelson, *moons, *blr]) == declared("thesis_predictives")


BLR_NUMBERS = {"max_noise": 0.5, "peak_offset": 0.01, "model_data": 0.05, "model_far_band": 0.4,
               "model_far_confident": 0.02}


def test_blr_claims_of_fig_5_5b():
    """notes-000 item 18: √Λ at most 0.5 and peaking on the 0.5-contour; the model std smaller at the data than far
    along the boundary, and small far from both."""
    assert verdicts(thesis_predictives.blr_claims(BLR_NUMBERS)) == ["holds"] * 3
    off_boundary = thesis_predictives.blr_claims({**BLR_NUMBERS, "peak_offset": 0.2, "model_far_band": 0.01})
    assert verdicts(off_boundary) == ["does not hold"] * 3
    no_far_band = thesis_predictives.blr_claims({**BLR_NUMBERS, "model_far_band": float("nan")})
    assert verdicts(no_far_band) == ["holds", NA, NA]  # a grid without far boundary points gives no verdict


def evidence_grid() -> pd.DataFrame:
    return pd.DataFrame([{"delta": d, "sigma2": s, "log_marglik": -abs(d - 0.4) - abs(s - 0.1),
                          "train_ll_map": 0.5 - d, "test_ll_map": 0.2 - abs(d - 0.4)}
                         for d in (0.001, 0.4, 100.0) for s in (0.001, 0.1, 1.0)])


def test_evidence_claims_of_figs_5_2_and_5_3():
    table = evidence_grid()
    best = table.loc[table["log_marglik"].idxmax()]
    a = table.loc[table["train_ll_map"].idxmax()]
    b = table[(table["delta"] == 100.0) & (table["sigma2"] == 1.0)].iloc[0]
    fig5_2 = toys.fig5_2_claims(table, best, a, b)
    # ★ = (0.4, 0.1); A = (0.001, 0.001) below ★ in δ and σ², train 0.499 > 0.1, test −0.199 < 0.2; B below ★
    assert verdicts(fig5_2) == ["holds"] * 6
    # a train-ℓℓ argmax at ★'s σ² is not in the low-noise corner
    assert verdicts(toys.fig5_2_claims(table, best, table.iloc[1], b))[3] == "does not hold"
    curve = table[table["sigma2"] == 0.1].sort_values("delta")
    fig5_3 = toys.fig5_3_claims(curve, best, curve.iloc[0], curve.iloc[-1])
    # δ* = 0.4 ∈ [0.02, 2]; train ℓℓ 0.499 at the smallest δ; the evidence falls at both ends
    assert verdicts(fig5_3) == ["holds"] * 4
    assert answered([*fig5_2, *fig5_3]) == {("notes-000", n) for n in (11, 12, 13)}


def test_fig5_3_map_claims():
    claims = toys.fig5_3_map_claims(1, 0.97, {"★": -0.26, "A": -1.6, "B": -0.5})
    assert verdicts(claims) == ["holds"] * 3
    # 3 training errors, a curved boundary (90 % linear agreement), ★ below B
    assert verdicts(toys.fig5_3_map_claims(3, 0.9, {"★": -0.6, "A": -1.6, "B": -0.5})) == ["does not hold"] * 3
    # B predicts one class everywhere: no contour to call straight; no runs at all
    assert verdicts(toys.fig5_3_map_claims(0, float("nan"), {}))[1:] == [NA, NA]
    assert answered(claims) == {("notes-000", 14)}


def test_banana_claims():
    table = pd.DataFrame.from_dict({"map": (0.25, 0.89, 0.03), "nn": (0.325, 0.88, 0.09), "glm": (0.202, 0.904, 0.02),
                                    "gp": (0.205, 0.90, 0.02)}, orient="index", columns=["nll", "accuracy", "ece"])
    by_delta = pd.DataFrame({"nn": [0.5, 0.4, 0.3], "glm": [0.3, 0.3, 0.35]}, index=[0.1, 1.0, 10.0])
    claims = toys.banana_claims(table, by_delta)
    assert verdicts(claims) == ["holds"] * 4  # GLM loses at one δ of three: at most one
    assert claims[2].numbers == "1 of 3"
    assert verdicts(toys.banana_claims(table, by_delta.assign(glm=0.6)))[2] == "does not hold"


def test_banana_claims_without_a_delta_are_not_applicable_not_passed():
    claims = toys.banana_claims(pd.DataFrame(columns=["nll", "accuracy", "ece"]),
                                pd.DataFrame(columns=["nn", "glm"]))
    assert set(verdicts(claims)) == {NA}
    assert claims[2].text.startswith("δ values where GLM NLL > NN NLL ≤ 1")
    fig4 = toys.fig4_claims(pd.DataFrame(columns=["accuracy"]), dict.fromkeys(FIG4_NUMBERS, float("nan")))
    assert set(verdicts(fig4)) == {NA}  # no run: no verdict, never a pass
    assert answered([*claims, *fig4]) | {("notes-000", n) for n in (11, 12, 13, 14)} == declared("toys")


FIG4_NUMBERS = {"glm_sharpness": 0.4, "nn_sharpness": 0.1, "epistemic_far": 0.01, "epistemic_data": 0.001}


def test_banana_fig4_claims():
    """notes-004 item 5: glm within 2 accuracy points of MAP; bnn washed out (sharpness below half the glm's, or
    5 points less accurate than MAP); far epistemic variance at least twice that at the data."""
    table = pd.DataFrame({"accuracy": [0.89, 0.88, 0.904]}, index=["map", "nn", "glm"])
    claims = toys.fig4_claims(table, FIG4_NUMBERS)
    assert verdicts(claims) == ["holds"] * 3
    assert claims[1].text == "bnn mean |p − 0.5| on the grid < 0.5 × glm's or MAP − bnn test accuracy ≥ 0.05 " \
                             "(bnn washed out)"
    sharp = toys.fig4_claims(table, {**FIG4_NUMBERS, "nn_sharpness": 0.3, "epistemic_far": 0.0015})
    assert verdicts(sharp) == ["holds", "does not hold", "does not hold"]
    assert verdicts(toys.fig4_claims(table.assign(accuracy=[0.93, 0.8, 0.904]), FIG4_NUMBERS))[0] == "does not hold"
    no_far_points = toys.fig4_claims(table, {**FIG4_NUMBERS, "epistemic_far": float("nan")})
    assert verdicts(no_far_points)[2] == NA


@pytest.mark.parametrize("depth", [0, 1])
def test_the_representer_identity_holds_at_a_stationary_map_and_with_the_gradient_term_anywhere(depth):
    """float64, a per-parameter prior precision (not isotropic): away from the optimum the plain identity is off
    and the gradient-corrected one exact; at the optimum (Newton on a logistic regression, where f = Jθ) both hold.
    A sign or a scale error in the kernel, the importances or the gradient term breaks the second check."""
    problem, _ = tiny_problem("bernoulli", depth=depth, n=40, d=3)
    problem.model.module.double()
    P = problem.theta0.numel()
    problem = dataclasses.replace(problem, X=problem.X.double(), theta0=problem.model.theta().double(),
                                  prior_precision=torch.linspace(0.5, 2.0, P, dtype=torch.float64))
    X_test = torch.randn(4, 3, generator=torch.Generator().manual_seed(7), dtype=torch.float64)

    def errors(theta):
        f, J = thesis_fig5_6.logit_and_jacobians(problem.model, theta, problem.X)
        f_test, J_test = thesis_fig5_6.logit_and_jacobians(problem.model, theta, X_test)
        K = thesis_fig5_6.kernel(J_test, J, problem.prior_precision)
        a = problem.y.double() - torch.sigmoid(f)
        return thesis_fig5_6.representer_errors(f_test, J_test, K, a, theta, problem.prior_precision,
                                                thesis_fig5_6.neg_log_joint_gradient(problem, theta))

    plain, corrected = errors(problem.theta0)
    assert plain > 1e-2 and corrected < 1e-12
    if depth == 0:
        theta = problem.theta0.clone()
        for _ in range(30):  # Newton's method on the convex log joint
            objective = lambda t: sum_neg_log_joint(problem, t)  # noqa: E731
            H = torch.autograd.functional.hessian(objective, theta)
            theta = theta - torch.linalg.solve(H, thesis_fig5_6.neg_log_joint_gradient(problem, theta))
        assert max(errors(theta)) < 1e-12
