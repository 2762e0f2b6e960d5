"""Stored runs as OpenTelemetry spans (OpenInference conventions), and their export to a collector."""
