"""The pre-flight check of a config: check (`validate_config`: what the config names, built
without data), keywords (what a component accepts, its refusals as one line) and rules (what no
constructor refuses, as tables)."""
