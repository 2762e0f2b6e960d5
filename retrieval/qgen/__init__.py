"""Multi-hop questions composed from a KB's own graph, with the checks that they need their hops."""
