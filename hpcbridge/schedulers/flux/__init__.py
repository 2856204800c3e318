"""Flux: ``adapter`` -> ``session`` (opened once) -> ``native_driver`` or ``cli_driver`` over
``driver_base`` and the engine's runner; pure: ``planning``/``request`` (the submission),
``commands`` (argv), ``answers``/``instance_answers``/``status`` (their parsers), ``jobspec``,
``ids``, ``instance`` (the releases as data), ``options``, ``uri``, ``journal_events``,
``checks`` (doctor's).
"""
