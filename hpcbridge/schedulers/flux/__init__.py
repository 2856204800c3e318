"""Flux: the adapter, its session and two drivers, over pure builders and parsers.

One submission, in reading order: ``adapter`` (the job kind, ids, dry runs) ->
``submission`` (planned: resources translated, queue, time left, dependencies,
refused before anything is staged) -> a driver, ``bindings_driver`` (flux-core's
Python bindings) or ``command_driver`` (``flux`` commands, locally or over SSH),
which hands ``submission.send`` its attempt (again while the instance starts, then
each job's outcome) -> ``jobspec`` (the jobspec and the pipelined submit, also run
under ``flux python``).  A lost answer's jobs are found by their keys with
``commands.KeyFinder``.

Around it:

- ``session``: opening the session - the bindings, which instance (``FLUX_URI``,
  ``slurm:ID``, ``lsf:ID``, a Flux job id), the driver, the release - once;
- ``instance``: what is known of the instance (release, queues, time left) and the
  version policies of the releases (0.26, 0.49, 0.88), pure;
- ``command_line``: the ``flux`` command lines and the parsers of their answers, pure;
  ``commands``: running them through the executor, and finding jobs by their keys;
- ``status``: a job's id in every encoding, and its state from ``flux jobs``, its
  eventlog or the bindings, pure;
- ``journal``: waiting woken by job ends (native driver): one journal stream for all
  (0.68+), else a watch per job;
- ``doctor``: ``hpcbridge doctor`` for Flux.
"""
