"""The pre-flight check of a config: check (the entry points), build (what the config names,
built without data), keywords (what a component accepts, its refusals as one line), rules (what
no constructor refuses, as tables) and views (where the training views are drawn, and paired)."""
