"""Method ``kernels-3`` (docs/reconstruction-kernels3.md, issue #33): layer traces composed from
published GPU kernels where the shape exists, a shape-aware model fitted per GPU with shared
priors where it does not, bytes over achieved bandwidth for memory-bound layers, and a
per-layer overhead per framework family; the K80 by Habitat-style transfer. Fitted once when a
release is built; the parameters ship in the release's ``method_params`` table.
"""
