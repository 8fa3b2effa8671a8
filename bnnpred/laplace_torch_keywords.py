"""laplace-torch's keywords, refused with the equivalent here: a user coming from ``Laplace(model, ...)`` learns the
bnnpred spelling from the error instead of a bare ``TypeError`` (issue 36)."""

from __future__ import annotations

from typing import Any

# keyword of laplace-torch's Laplace(...) / .fit / .optimize_prior_precision -> how bnnpred.fit says it
FIT = {
    "hessian_structure": "options={'structure': 'kron'} (full, diag, kron)",
    "subset_of_weights": "options={'subset_of_weights': 'last_layer'} (all, last_layer)",
    "likelihood": "task='multiclass' (regression, binary, multiclass, count)",
    "sigma_noise": "sigma2=σ² (the noise variance, not its square root)",
    "backend": "nothing: the curvature is computed with torch.func, no backend to choose",
    "temperature": "nothing: no tempered posterior here",
    "prior_mean": "nothing: the prior mean is 0",
    "train_loader": "fit(model, loader, task=...) with the loader in place of X",
}
# keyword of laplace-torch's la(x, ...) -> how Fitted.predict says it
PREDICT = {
    "pred_type": "kind='glm' (pred_type='glm', link_approx='mc'), kind='closed' (link_approx='probit'), "
                 "kind='bridge' (link_approx='bridge') or kind='nn' (pred_type='nn')",
    "link_approx": "kind='closed' for 'probit', kind='bridge' for 'bridge' (without its corrections), kind='glm' for "
                   "'mc' (sampled)",
}


def refuse(call: str, given: dict[str, Any], equivalents: dict[str, str]) -> None:
    """Raise ``TypeError`` for the first keyword in ``given`` (keywords the call does not take): laplace-torch's
    with the equivalent here, any other as Python says it."""
    for keyword in given:
        if keyword in equivalents:
            raise TypeError(f"{call}() takes no {keyword}= (laplace-torch's keyword); here: {equivalents[keyword]}")
        raise TypeError(f"{call}() got an unexpected keyword argument '{keyword}'")
