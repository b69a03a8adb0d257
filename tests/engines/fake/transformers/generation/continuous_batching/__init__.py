"""The fake continuous batching package: scheduler, requests, cache and the batch processor with 5.17's names (tests/engines/fake)."""
