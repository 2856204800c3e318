"""Flux: the adapter, its session and two drivers, over pure builders and parsers.

- ``adapter``: ``FluxAdapter`` (ids, output template, dry runs without Flux);
- ``session``: the instance, its release policy, queues and driver, built once;
- ``native`` / ``native_wait`` and ``cli`` / ``runner``: the two drivers;
- ``planning``: what both do before submitting (queue choice, time limits);
- pure: ``requests`` (submission argv and jobspec params), ``jobspec`` (also run
  under ``flux python``), ``jobs`` (status commands and their output),
  ``states`` (Flux states to ours), ``instance``, ``queues``, ``versions``,
  ``uri``, ``ids``;
- ``bindings``: loading flux-core's Python bindings; ``doctor``: ``hpcbridge doctor``.
"""
