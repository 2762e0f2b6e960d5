"""The ground floor: records, errors, paths, environment variables, CPU settings and input checks.
Everything else in HopTrace may import it; it imports nothing of HopTrace's."""
