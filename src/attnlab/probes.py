"""Shared probe helpers; a paper's own probe set lives beside its experiments
(``attnlab.experiments.<paper>.probes``)."""

from __future__ import annotations

import jax.numpy as jnp


def role_mass(a_bar, roles, role):
    """Total attention weight that ``a_bar`` (M,) puts on the tokens of ``role``."""
    return jnp.sum(jnp.where(roles == role, a_bar, 0.0))
