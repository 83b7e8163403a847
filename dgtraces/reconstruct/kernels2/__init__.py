"""Methods ``kernels-2.0`` and ``kernels-2.1`` (docs/reconstruction-kernels.md; evaluated, not
adopted): GEMM kernels priced by waves of thread-block tiles on the device's SMs.

:mod:`.gemm` the GEMM engine and the implicit-GEMM shapes of each conv direction,
:mod:`.network` a network's per-layer device times, :mod:`.stage1` the global kernel
constants fitted on DeepBench, :mod:`.stage2` kernels-2.0's per-device constants (throughputs),
:mod:`.traces` the published per-layer traces as fit blocks, :mod:`.stage2_traces`
kernels-2.1's per-device constants (traces and throughputs), :mod:`.trace` one reconstructed
trace under either version.
"""
