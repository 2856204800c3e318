"""Where settings come from: the environment's variables (``variables``)."""
