"""The fake transformers' generation package (tests/engines/fake)."""
