"""Why isotropy (chapters 01–03): the delta method, proxy-data bias, curvature spectra.

- `delta_method`, `linear_gaussian`, `tangent_kernel`: the derivation and where it is exact;
- `mlp`, `train`, `classifier`: the one small JAX MLP (and its per-input gradients), the one
  Adam, and the binary classifier built from them;
- `damped`: the one damped quadratic form gᵀ(AᵀA + λI)⁻¹g (direct or Woodbury);
- `ggn_laplace`: Laplace (GGN) predictive variances from Jacobians;
- `proxy`, `text_proxy`: covariance from proxy data, synthetic and on a small transformer;
- `spectra`: Lanczos, stochastic Lanczos quadrature, Lanczos quadratic forms;
- `damping`: is the damped inverse curvature close to a multiple of I?;
- `lm_hessian`: Hessian-vector products of a causal LM's block.
"""
