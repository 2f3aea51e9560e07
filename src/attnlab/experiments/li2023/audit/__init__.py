"""The audit designs of the li2023 claims (:mod:`attnlab.audit`), one module per experiment: a
simulator of the columns the experiment's ``analyse`` reads, at its real design, its H1 / H0 per
claim and a plug-in of the noise a stored run shows. Nothing is trained; the noise levels are
defaults from cpu-scale runs (``--from`` a run plugs in its own), the effect sizes come from the
paper, never from a run. :mod:`.base` holds what the designs share."""
