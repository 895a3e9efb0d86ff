"""Datasets, views and evaluation protocols of the MixCo benchmark suite."""
