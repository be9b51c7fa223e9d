"""fastdeflate's benchmark code (run it with ``python benchmarks/run.py``).

Modules: ``payloads`` (built-in messages), ``engines`` (the codec columns),
``measure`` (interleaved timing), one module per part of the report
(``codec_table``; ``connections`` and ``server_memory`` with its processes in
``server_peer``; ``library_table``; ``end_to_end``; ``memory_table``), and
``report`` / ``charts`` / ``summary`` for the Markdown and PNG output.
"""
