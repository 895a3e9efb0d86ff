"""The pre-flight check of a config: `check.validate_config`."""
