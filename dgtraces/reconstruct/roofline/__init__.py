"""Method ``roofline-1.1`` (docs/reconstruction.md): the per-layer soft-roofline cost model of
releases v0.3.0-v0.5.0, fitted per device on the published throughputs of
``calibration.csv``.

:mod:`.costmodel` the model (and the layer arrays and bytes rule the kernel methods
share), :mod:`.fit` its Levenberg-Marquardt fit, :mod:`.calibration` device peaks, calibration rows
and the per-device fit, :mod:`.cpu` its measured error on this machine's CPU, :mod:`.bcaffe`
and :mod:`.gpu` its error against the published GPU layers.
"""
