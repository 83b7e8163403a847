"""Collective communication models: what one all-reduce (or other collective) costs on given
links, below the predictor that schedules them (issue #34).

- :mod:`.links`: interconnect presets (``links.csv``, ``link_aliases.csv``, each row with a
  cited source) resolved into :class:`~.links.Link` objects; a release's measured
  ``comm_fits`` replace the ``loopback-gloo`` row.
- :mod:`.linkfit`: a link from a user's own measurement (``--link-fit``: a comm_fits/comm
  table, an OSU or nccl-tests log).
- :mod:`.collectives`: the alpha-beta registry ``COLLECTIVES`` (ring, tree, dbtree,
  hierarchical, ps), scalar and vectorised.
- :mod:`.nccl`: NCCL's tuning model (algorithm and protocol per message size, fabrics).
- :mod:`.collective_time`: one collective's time per message size (``dgtraces collective``).
- :mod:`.algorithm_default`: the algorithm a command uses when none is given.

Nothing here imports :mod:`dgtraces.predict`; ``scripts/import_graph.py`` checks it.
"""
