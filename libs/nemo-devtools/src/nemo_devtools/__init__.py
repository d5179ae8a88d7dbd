"""Local stand-ins and process helpers shared by `nemo dev up` (``nemo_ops``) and the tests
(``nemo_testing``, ``tests/``): it imports neither, nor any service."""
