"""The trace database: runs and their stages, experiments, question sets, retention under a size cap."""
