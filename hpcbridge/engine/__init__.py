"""The scheduler-neutral engine: ``adapter`` -> ``submitting`` (``jobscript``) -> a
``driver``; then ``following`` and ``waiting`` over ``tracking`` and ``polling``."""
