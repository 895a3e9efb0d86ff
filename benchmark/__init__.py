"""Everything around the methods: data, evaluation, reports, the safe mmengine run, suites and
the quality harness, one subpackage per concern with imports running one way."""
