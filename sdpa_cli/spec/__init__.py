"""Spec models shared by every study: base fields, YAML reading, work and memory limits."""
