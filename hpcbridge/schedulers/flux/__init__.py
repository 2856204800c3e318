"""Flux: the adapter, its session and two drivers, over pure builders and parsers.

One submission, in reading order: ``adapter`` (the job kind, ids, dry runs) ->
``plan`` (resources translated, queue, time left, dependencies: refused before
anything is staged) -> a driver, ``bindings_driver`` (flux-core's Python
bindings) or ``command_driver`` (``flux`` commands, locally or over SSH) ->
``sending`` (again while the instance starts, then the outcome; a lost answer's
jobs found by their keys) -> ``jobspec`` (the jobspec and the pipelined submit,
also run under ``flux python``).

Around it:

- ``session``: opening the session - the bindings, which instance (``FLUX_URI``,
  ``slurm:ID``, ``lsf:ID``, a Flux job id), the driver, the release - once;
- ``instance``: what is known of the instance (release, queues, time left) and the
  version policies of the releases (0.26, 0.49), pure;
- ``command_line``: the ``flux`` command lines and the parsers of their answers, pure;
  ``commands``: running them through the executor;
- ``status``: a job's id in every encoding, and its state from ``flux jobs``, its
  eventlog or the bindings, pure;
- ``journal``: waiting woken by job ends (native driver): one journal stream for all
  (0.68+), else a watch per job;
- ``doctor``: ``hpcbridge doctor`` for Flux.
"""
