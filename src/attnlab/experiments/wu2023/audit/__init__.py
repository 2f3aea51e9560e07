"""Audit designs of the wu2023 claims (:mod:`attnlab.audit`), one module per experiment: a simulator
of the columns the experiment's ``analyse`` reads, at its real design (the cells of the design, grid
points × seed blocks × reps, the ``compare`` variants and the calibration stage of ``wu2023-init``,
keep their columns and gain the measured ones), and H1 / H0 for each claim. Effect sizes are the
hypotheses'; the nuisance levels (kernel scales, rates, scatter) are ``noise``, defaults from cpu-scale
runs said per design, which ``plug_in`` reads from a stored run where it can. :mod:`.runs` holds the
simulated GD runs of the trained experiments, :mod:`.hypotheses` the H1 / H0 they share."""
