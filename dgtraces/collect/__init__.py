"""PyTorch collector (optional extra ``dgtraces[collect]``, exactly ``torch==2.13.0``).

* :func:`dgtraces.collect.layers.collect_layers` -> ``runs`` + ``layer_timings``
* :func:`dgtraces.collect.comm.collect_comm` -> ``comm`` + ``comm_fits``
* :func:`dgtraces.collect.ssgd.collect_ssgd` -> ``iterations``

Nothing here imports torch at import time; :mod:`dgtraces.collect.net` (the torch model
built from the same spec as the ``layers`` table) does, and is loaded only after the
dependency check.
"""
