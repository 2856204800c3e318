"""Flux: the adapter, its session and two drivers, over pure builders and parsers.

One submission, in reading order: ``adapter`` (the job kind, ids, dry runs) ->
``plan`` (resources translated, queue, time left, dependencies: refused before
anything is staged) -> a driver, ``bindings_driver`` (flux-core's Python
bindings) or ``command_driver`` (``flux`` commands, locally or over SSH) ->
``sending`` (again while the instance starts, then the outcome) -> ``jobspec``
(the jobspec and the pipelined submit, also run under ``flux python``).

Around it:

- ``session``: opening the session - instance, driver, release - once;
- ``uri``: which instance the settings name, and resolving ``slurm:ID``,
  ``lsf:ID`` or a Flux job id to its URI;
- ``instance``: what is known of the instance (release, queues), pure;
- ``versions``: the version policies of the releases (0.26, 0.49);
- ``command_line``: the ``flux`` command lines and the parsers of their answers, pure;
- ``status``: a job's state from ``flux jobs`` or the bindings, pure;
- ``eventlog``: a job's state from its eventlog (where ``flux jobs`` cannot say), pure;
- ``events``: waiting woken by job ends (native driver);
- ``bindings``: loading flux-core's Python bindings;
- ``ids``: the encodings of a Flux job id;
- ``doctor``: ``hpcbridge doctor`` for Flux.
"""
