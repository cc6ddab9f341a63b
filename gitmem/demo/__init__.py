"""``gitmem demo`` and its stand-in for the Messages API, kept out of the core's namespace.

:mod:`gitmem.demo.progress_log` runs the demo's sessions through the SDK's tool runner;
:mod:`gitmem.demo.scripted_api` serves scripted replies on 127.0.0.1 in place of the Messages
API, for the demo's offline mode, the tests and the examples. Nothing in the core imports
either (``tests/test_layers.py``); importing this package imports neither, nor the SDK.
"""
