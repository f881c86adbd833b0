"""Bayesian references on synthetic problems (chapters 04 and 05).

- `synthetic`: the problems (two moons, gap regression) and their query sets;
- `bnn`: Bayesian MLPs on a flat parameter vector, the MAP;
- `mcmc`: NUTS reference posteriors (NumPyro) with diagnostics;
- `laplace`: local estimates at the MAP (isotropic, Laplace/GGN, diagonal, aleatoric);
- `validation`: data → MAP → NUTS reference → estimates → agreement, for one setting.
"""
