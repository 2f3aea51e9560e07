"""Li et al. 2023 (arXiv 2302.06015): the shallow ViT's sample complexity, sparse attention and
token sparsification. The data model is :mod:`attnlab.data.li2023`, the models (ViT,
attention-free baseline, linear classifier on the mean token) :mod:`attnlab.models.li2023`;
this package holds the paper's probes (its experiments build on them)."""
