"""Jacobians and curvature (GGN, empirical Fisher) of a network, computed with ``torch.func``."""
