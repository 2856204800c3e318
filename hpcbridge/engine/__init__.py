"""The scheduler-neutral engine: what is the same for every scheduler.

``adapter`` (the ``SchedulerAdapter`` every scheduler's adapter extends) ->
``submitting`` (one submission: plan -> stage -> send -> record; ``jobscript``
builds its wrappers) -> a scheduler's driver (``driver``: the contract every
driver keeps).  Then ``following`` and ``waiting`` over ``tracking`` (states
merged, exit-code files) and ``polling`` (one polite round for every process);
``observation`` is what travels between them.  ``sweeping`` and ``feeding``
send many jobs through ``service``; ``adoption`` finds a submission whose answer
was lost; ``retrying`` holds the time budgets.
"""
