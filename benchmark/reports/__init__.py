"""Results as data: result records, provenance, and the tables and reports generated from them."""
