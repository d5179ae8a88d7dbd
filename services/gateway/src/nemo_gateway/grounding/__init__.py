"""Grounded answers: preparing numbered sources, flagging instruction-like passages, checking
citations sentence by sentence."""
