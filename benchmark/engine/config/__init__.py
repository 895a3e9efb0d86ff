"""The config checker: every key and value of a config checked before anything is built (check),
its machinery (schema), the rules (rules), the table of every field (fields) and the device-view
rules (views)."""
