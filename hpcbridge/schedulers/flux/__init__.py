"""Flux: ``adapter`` -> ``submission`` (plan, send) -> ``bindings_driver`` or ``command_driver``
-> ``jobspec``; ``session`` opens it once, ``instance``/``command_line``/``status`` are pure.
"""
