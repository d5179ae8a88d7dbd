"""Fixtures shared by every Nemo test suite: real peers on loopback, never mock objects."""
