"""Quality measurements beside the product: speed (`speed/`) and fault injection (`faults/`); never
imported by a training run or a suite."""
